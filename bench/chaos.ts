/**
 * The long form of the chaos suite: `npm run chaos -- [--seed N] [--faults N] [--reconciles N] [--names N]`.
 * Prints the seed first, a line per fault, then the figures (settle time after the last fault,
 * retries, duplicates and leaks found) and, when an invariant broke, the timeline and the
 * violations; exits 1 then. The bounded form runs in `npm test` (test/chaos/chaos.test.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { formatReport, runChaos } from '../test/chaos/run.ts';

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    faults: { type: 'string', default: '110' },
    names: { type: 'string', default: '14' },
    'step-ms': { type: 'string', default: '250' },
    'settle-ms': { type: 'string', default: '120000' },
    reconciles: { type: 'string', default: '1000' },
  },
});

function integer(flag: string, text: string | undefined): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0) {
    process.stderr.write(`--${flag}: expected a whole number, got ${JSON.stringify(text)}\n`);
    process.exit(2);
  }
  return n;
}

const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : integer('seed', values.seed);
process.stdout.write(`chaos seed ${seed}\n`);
const dir = await mkdtemp(join(tmpdir(), 'egress-chaos-'));
try {
  const result = await runChaos({
    seed,
    faults: integer('faults', values.faults),
    names: integer('names', values.names),
    stepMs: integer('step-ms', values['step-ms']),
    settleMs: integer('settle-ms', values['settle-ms']),
    minReconciles: integer('reconciles', values.reconciles),
    dir,
    log: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(`${formatReport(result)}\n`);
  process.stdout.write(`${JSON.stringify(result.figures)}\n`);
  process.exitCode = result.violations.length > 0 ? 1 : 0;
} finally {
  await rm(dir, { recursive: true, force: true });
}
