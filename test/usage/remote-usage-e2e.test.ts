/**
 * Remote proxies' traffic from end to end through the worker's wiring (src/cli/start-roles.ts): a
 * worker configured with a kvm provider stores what a Ready proxy of that provider (the proxy
 * program in container mode, as the VM runs it) carried, and `GET /v1/usage` answers it by
 * provider and domain. The provider is a stand-in (no libvirt host): the proxy is written into the
 * store as reconcile would leave it, and the worker runs no reconcile.
 */
import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';
import { kvmProviderSchema } from '../../src/providers/kvm/config.ts';
import { buildProxyProgram } from '../../src/providers/local/proxy-program.ts';
import type { Provider } from '../../src/providers/types.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import type { UsageReport } from '../../src/usage/usage-store.ts';
import { testConfig } from '../support/config.ts';
import { startContainerProgram, stopChild } from '../support/container-program.ts';
import { getThroughProxy } from '../support/proxy-get.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { countingOrigin, type CountingOrigin } from '../support/traffic-clients.ts';
import { waitFor } from '../support/wait.ts';

type UsageAnswer = Pick<UsageReport, 'rows'>;

describe('a remote proxy’s traffic through the worker to GET /v1/usage', () => {
  const base = testConfig({ queues: ['checks'], readiness: { intervalMs: 0 } });
  const config = freezeConfig({
    ...base,
    providers: [
      kvmProviderSchema.parse({ name: 'kvm-a', type: 'kvm', hosts: [{ name: 'h', address: '127.0.0.1', privateKeyFile: '/k', insecureIgnoreHostKey: true }] }),
    ],
    usage: { maxDomainsPerPoolHour: 50, retentionMs: 86_400_000, collectIntervalMs: 1000 },
  });
  /** Health only, no lifecycle: the proxy below is the store's, not this provider's to make. */
  const standIn = (): Provider => ({ name: 'kvm-a', type: 'kvm', targets: () => [], check: () => Promise.resolve([]), close: () => Promise.resolve() });
  let roles: RunningRoles;
  let api: string;
  let origin: CountingOrigin;
  let redis: Redis;
  let child: ChildProcess | undefined;
  let port: number;
  let credentials: ProxyCredentials;

  const usage = async (groupBy: string): Promise<UsageAnswer> => {
    const res = await fetch(`${api}/v1/usage?groupBy=${groupBy}`);
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as UsageAnswer;
  };

  beforeAll(async () => {
    origin = await countingOrigin('127.0.0.1', 1500);
    redis = new Redis(config.redis.url ?? '');
    const store = new RedisProxyStore(redis, config.redis.prefix);
    await store.apply({ metadata: { name: 'vm-1', labels: {} }, spec: { provider: 'kvm-a' } });
    credentials = (await store.credentials('vm-1'))!;
    port = await freePort();
    child = await startContainerProgram(await buildProxyProgram(await tempDir('egress-remote-e2e-')), port, credentials);
    await store.updateStatus('vm-1', (p) => ({ ...p.status, phase: 'Ready', url: `http://127.0.0.1:${port}` }));
    roles = await runRoles(config, ['worker', 'api'], silentLogger(), { providerFactory: standIn });
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles.close();
    await stopChild(child);
    await origin.close();
    redis.disconnect();
  });

  test('what the proxy carried is stored once under its provider and domain', async () => {
    const [up0, down0] = [origin.received(), origin.sent()];
    for (let i = 0; i < 3; i++) expect((await getThroughProxy({ port, ...credentials }, `http://127.0.0.1:${origin.port}/vm-${i}`)).status).toBe(200);
    const carried = { up: origin.received() - up0, down: origin.sent() - down0 };

    const byDomain = await waitFor('the requests stored', async () => {
      const row = (await usage('domain')).rows.find((r) => r.key === '127.0.0.1');
      return row && row.requests === 3 ? row : undefined;
    });
    expect(byDomain).toMatchObject({ bytesUp: carried.up, bytesDown: carried.down, tunnels: 0 });
    expect((await usage('provider')).rows.map((r) => [r.key, r.requests])).toEqual([['kvm-a', 3]]);
    // Later collections add what came after, and nothing twice.
    const [up1, down1] = [origin.received(), origin.sent()];
    expect((await getThroughProxy({ port, ...credentials }, `http://127.0.0.1:${origin.port}/vm-3`)).status).toBe(200);
    const more = await waitFor('the fourth request stored', async () => {
      const row = (await usage('domain')).rows.find((r) => r.key === '127.0.0.1');
      return row && row.requests !== 3 ? row : undefined;
    });
    expect(more).toMatchObject({ requests: 4, bytesUp: carried.up + origin.received() - up1, bytesDown: carried.down + origin.sent() - down1 });
  });
});
