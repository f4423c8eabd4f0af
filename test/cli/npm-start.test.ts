import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { appendFile, cp, readFile, stat, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/redis/redis-server.ts';
import { ROOT } from '../support/cli.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);
const BUILDING = 'egress: building dist/';
/** What the build reads and what `npm start` runs, copied into a checkout of the test's own. */
const CHECKOUT = ['src', 'queues', 'workers', 'console', 'scripts', 'bin', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];
/** The user's environment, not the suite's: no EGRESS_FROM_SOURCE (npm start runs dist/). */
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', TMPDIR: process.env.TMPDIR ?? '/tmp' };

/** `npm start -- ARGS` in `checkout` (what npm runs: node scripts/start.js ARGS), to its exit. */
async function npmStart(checkout: string, args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['scripts/start.js', ...args], { cwd: checkout, env: ENV });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string };
    if (typeof e.code !== 'number') throw err;
    return { code: e.code, output: (e.stdout ?? '') + (e.stderr ?? '') };
  }
}

describe('npm start builds only what changed, and never under a running egress', () => {
  let checkout: string;

  beforeAll(async () => {
    checkout = await tempDir('egress-checkout-');
    for (const entry of CHECKOUT) await cp(join(ROOT, entry), join(checkout, entry), { recursive: true });
    await symlink(join(ROOT, 'node_modules'), join(checkout, 'node_modules'));
  });

  it('builds a checkout without dist/ once, saying so in one line, then starts without compiling', async () => {
    const dataDir = await tempDir('egress-start-data-');
    const first = await npmStart(checkout, ['--check-config', '--data-dir', dataDir]);
    expect(first.code, first.output).toBe(0);
    expect(first.output.split('\n').filter((l) => l.includes(BUILDING))).toHaveLength(1);
    expect(first.output).toContain('configuration OK');
    const built = (await stat(join(checkout, 'dist/src/cli/main.js'))).mtimeMs;

    const second = await npmStart(checkout, ['--check-config', '--data-dir', dataDir]);
    expect(second.code, second.output).toBe(0);
    expect(second.output).not.toContain(BUILDING);
    expect((await stat(join(checkout, 'dist/src/cli/main.js'))).mtimeMs).toBe(built);
  });

  it('refuses to rebuild dist/ while an egress of the checkout runs from it, and leaves dist/ as it was', async () => {
    const dataDir = await tempDir('egress-start-running-');
    const port = await freePort();
    const up = spawn(process.execPath, ['scripts/start.js', '--data-dir', dataDir, '--port', String(port)], {
      cwd: checkout,
      env: ENV,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let logs = '';
    up.stdout.on('data', (c: Buffer) => (logs += c.toString()));
    up.stderr.on('data', (c: Buffer) => (logs += c.toString()));
    const exited = once(up, 'exit');
    try {
      await waitFor('egress up to listen', () => logs.includes('egress is up') || (up.exitCode !== null ? Promise.reject(new Error(logs)) : false), 60_000);
      const hash = await readFile(join(checkout, 'dist/.source-hash'), 'utf8');
      await appendFile(join(checkout, 'src/version.ts'), '\n// a change after the build\n');

      const second = await npmStart(checkout, ['--check-config', '--data-dir', await tempDir('egress-start-other-')]);
      expect(second.code).toBe(1);
      expect(second.output).toContain(`egress runs from it (pid ${up.pid ?? ''}`);
      expect(second.output).not.toContain(BUILDING);
      expect(await readFile(join(checkout, 'dist/.source-hash'), 'utf8')).toBe(hash);
    } finally {
      up.kill('SIGTERM');
      await exited;
    }
  });
});
