import { expect, test } from 'vitest';
import { tempDir } from '../support/temp-dirs.ts';
import { formatReport, runChaos } from './run.ts';

// The bounded form of the chaos suite (the long one is `npm run chaos`): every role a real process on
// a Redis with append-only persistence, kubernetes and gcp on their fakes, a seeded workload and
// fault schedule, then every invariant (test/chaos/invariants.ts). CHAOS_SEED replays a run.
// Its configuration is sized for at least 200 reconciles and 20 faults in about 3 minutes on a
// quiet machine; that is a budget for the configuration, not an assertion.
const seed = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : Math.floor(Math.random() * 2 ** 31);

test(`chaos: nothing lost, doubled or leaked under ${22} faults (seed ${seed})`, async () => {
  process.stdout.write(`chaos seed ${seed}\n`);
  const result = await runChaos({ seed, faults: 22, names: 10, stepMs: 200, settleMs: 90_000, minReconciles: 200, dir: await tempDir('egress-chaos-') });
  const report = formatReport(result);
  process.stdout.write(`${report}\n`);
  expect(result.violations, report).toEqual([]);
  expect(result.figures.faults, report).toBeGreaterThanOrEqual(20);
  expect(result.figures.reconciles, report).toBeGreaterThanOrEqual(200);
}, 600_000);
