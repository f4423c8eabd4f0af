import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { EGRESS_BIN, ROOT } from '../support/cli.ts';
import { packageVersion } from '../../src/version.ts';
import { tempDir } from '../support/temp-dirs.ts';

const run = promisify(execFile);
const RECORDER = join(ROOT, 'test/support/record-modules.cjs');

/**
 * What a command may not load: the providers' client libraries, the job queue, and (for the commands a
 * user types most) the validation and YAML libraries. Each costs more CPU at start than bare node.
 */
const HEAVY = ['@kubernetes/client-node', '@google-cloud/compute', 'google-gax', 'ssh2', 'bullmq', 'ioredis', '@bull-board', 'zod', 'yaml', 'pino'];

/**
 * The packages a fresh `egress ARGS` process loads (under node_modules), however it loads them, once
 * its output shows that it did what the command does (`expected` is in its stdout or stderr).
 */
async function packagesLoaded(args: string[], expected: string): Promise<Set<string>> {
  const file = join(await tempDir('egress-imports-'), 'modules.txt');
  const output = await run(process.execPath, ['--require', RECORDER, EGRESS_BIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, EGRESS_RECORD_MODULES: file, EGRESS_DATA_DIR: join(file, '..', 'data') },
  }).catch((err: { code?: unknown; stdout?: string; stderr?: string }) => {
    // A client command against a closed port fails (exit 1) after it loaded what it needs.
    if (err.code !== 1) throw err;
    return { stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  });
  expect(output.stdout + output.stderr).toContain(expected);
  const packages = new Set<string>();
  for (const line of (await readFile(file, 'utf8')).split('\n')) {
    const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(line);
    if (match?.[1]) packages.add(match[1]);
  }
  return packages;
}

describe('egress start-up loads only what the command needs', () => {
  it.each([
    [['--help'], 'Usage: egress'],
    [['--version'], packageVersion()],
    [['get', 'ph', '--api-url', 'http://127.0.0.1:1'], 'ERR_API_UNREACHABLE'],
    [['get', 'proxies', '--api-url', 'http://127.0.0.1:1'], 'ERR_API_UNREACHABLE'],
    [['usage', '--api-url', 'http://127.0.0.1:1'], 'ERR_API_UNREACHABLE'],
  ])('egress %j loads no provider client, queue, zod or YAML library', async (args, expected) => {
    const loaded = await packagesLoaded(args, expected);
    expect(loaded.has('commander')).toBe(true); // the recorder works: the command tree was built
    expect(HEAVY.filter((p) => [...loaded].some((l) => l === p || l.startsWith(`${p}/`)))).toEqual([]);
  });

  it('the server commands still load what they run on (the recorder sees ES modules and requires)', async () => {
    const loaded = await packagesLoaded(['up', '--check-config', '--data-dir', await tempDir('egress-imports-data-')], 'configuration OK');
    expect(loaded.has('zod')).toBe(true);
  });
});
