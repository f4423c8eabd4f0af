import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { AppConfig } from '../../src/config/app.ts';
import type { TargetResult } from '../../src/health/types.ts';
import { silentLogger } from '../../src/logging.ts';
import type { Provider } from '../../src/providers/types.ts';
import { testConfig } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';

describe('--concurrency bounds the checks that run at once', () => {
  let config: AppConfig;
  let roles: RunningRoles;
  let checks: Queue;
  let running = 0;
  let most = 0;
  const gates: (() => void)[] = [];

  /** A checker that stays in its check until the test opens its gate. */
  const gated = (name: string): Provider => ({
    name,
    type: 'local',
    targets: () => ['localhost'],
    check: async () => {
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => gates.push(resolve));
      running--;
      return [{ target: 'localhost', ready: true, reason: 'Ok', message: 'ok', details: {}, durationSeconds: 0 } satisfies TargetResult];
    },
    close: () => Promise.resolve(),
  });

  beforeAll(async () => {
    config = testConfig({ providers: [{ name: 'slow', type: 'local' }], intervalMs: 0, timeoutMs: 60_000, concurrency: 2 });
    roles = await runRoles(config, ['worker', 'publisher'], silentLogger(), { providerFactory: (c) => gated(c.name) });
    checks = new Queue(QUEUES.checks, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: config.redis.prefix });
  });
  afterAll(async () => {
    for (const open of gates.splice(0)) open();
    await roles.close();
    await checks.close();
  });

  test('the worker takes more jobs than that (their results may still be on the way) but runs at most --concurrency checks', async () => {
    await checks.addBulk(Array.from({ length: 6 }, () => ({ name: 'check', data: { provider: 'slow', trigger: 'adhoc' } })));
    // Two checks run; two more jobs are taken and wait for a place.
    await waitFor('4 active check jobs', async () => (await checks.getJobCounts('active')).active === 4);
    expect(running).toBe(2);
    // Open the gates one at a time: every check that ends lets a waiting job in, never more.
    for (let opened = 0; opened < 6; opened++) {
      await waitFor('a check waiting at its gate', () => gates.length > 0);
      gates.shift()?.();
    }
    await waitFor('all 6 checks completed', async () => (await checks.getJobCounts('completed')).completed === 6);
    expect(most).toBe(2);
  });
});
