import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { down } from '../../src/cli/commands/down-command.ts';
import { EgressError } from '../../src/errors.ts';
import { isAlive } from '../../src/redis/process-info.ts';
import { ROOT, runCli, spawnEgress, waitUpAndLocalReady, type EgressProcess } from '../support/cli.ts';
import { processesUnder } from '../support/processes-under.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const QUIET = { out: () => undefined, err: () => undefined };

describe('egress down', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const clean of cleanups.reverse()) await clean().catch(() => undefined);
  });

  it('with nothing running: says so, exit 0, as often as asked', async () => {
    const dataDir = await tempDir('egress-down-empty-');
    for (const dir of [dataDir, join(dataDir, 'never-made')]) {
      const run = await runCli(['down', '--data-dir', dir]);
      expect(run).toEqual({ code: 0, out: expect.stringMatching(new RegExp(`^nothing of ${dir} is running`)) as unknown, err: '' });
    }
    // Nor is there an API to name.
    expect(await runCli(['url', '--data-dir', dataDir])).toEqual({
      code: 1,
      out: '',
      err: `error: no \`egress up\` runs from ${dataDir}: start it (npm start), or pass --data-dir (EGRESS_DATA_DIR) or --api-url (EGRESS_API_URL) (ERR_NOT_RUNNING)\n`,
    });
    expect(await runCli(['url', '--data-dir', dataDir], { EGRESS_API_URL: 'http://127.0.0.1:9090/' })).toEqual({
      code: 0,
      out: 'http://127.0.0.1:9090\n',
      err: '',
    });
  });

  it('after `up` was killed with -9: stops what it left — the proxy host with its proxies and the private redis-server — and nothing of the data directory runs', async () => {
    const dataDir = await tempDir('egress-down-killed-');
    // Without the parent-death signal, as on a machine without setpriv: the redis-server outlives a killed owner.
    const up: EgressProcess = spawnEgress(['up', '--port', '0', '--data-dir', dataDir], { NO_PDEATHSIG: '1' }, resolve(ROOT, 'test/support/up-harness.ts'));
    cleanups.push(
      () => down(dataDir, QUIET),
      () => up.stop(),
    );
    const { apiUrl } = await waitUpAndLocalReady(up);
    const proxy = join(dataDir, 'p.yaml');
    await writeFile(proxy, 'kind: Proxy\nmetadata: { name: left-1 }\nspec: { provider: local }\n');
    const cli = (...args: string[]) => runCli([...args, '--data-dir', dataDir, '--api-url', apiUrl]);
    expect((await cli('apply', '-f', proxy)).code).toBe(0);
    await waitFor('left-1 Ready', async () => /left-1\s+local\s+Ready/.test((await cli('get', 'proxies')).out), 60_000);
    const redisPid = (JSON.parse(await readFile(join(dataDir, 'redis/server.json'), 'utf8')) as { pid: number }).pid;

    up.child.kill('SIGKILL');
    await up.exited;
    expect(isAlive(redisPid)).toBe(true);

    const run = await runCli(['down', '--data-dir', dataDir]);
    expect(run.code, run.err).toBe(0);
    expect(run.out).toMatch(
      new RegExp(
        `^stopped the local proxy host \\(pid \\d+(, with \\d+ relays?)?\\) and its proxies, the private redis-server \\(pid ${redisPid}\\) of ${dataDir}\\n$`,
      ),
    );
    expect(isAlive(redisPid)).toBe(false);
    expect(await processesUnder(dataDir)).toEqual([]);
    expect((await runCli(['down', '--data-dir', dataDir])).out).toBe(`nothing of ${dataDir} is running\n`);
  });

  it('an egress process that will not stop: exit 1 naming it and what to do', async () => {
    const dataDir = await tempDir('egress-down-stuck-');
    // Stands in for a hung `egress up`: a node program named egress.js that ignores SIGTERM, recorded as the data directory's API.
    const program = join(dataDir, 'egress.js');
    await writeFile(program, "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000); process.stdout.write('ready\\n');\n");
    const stuck = spawn(process.execPath, [program, 'up'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const exited = once(stuck, 'exit');
    cleanups.push(async () => {
      stuck.kill('SIGKILL');
      await exited;
    });
    await once(stuck.stdout, 'data');
    await writeFile(join(dataDir, 'api.json'), `${JSON.stringify({ url: 'http://127.0.0.1:1', pid: stuck.pid })}\n`);
    const failure = await down(dataDir, QUIET, { upStopMs: 1000 }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(EgressError);
    expect((failure as EgressError).code).toBe('ERR_DOWN');
    expect((failure as Error).message).toBe(
      `egress pid ${stuck.pid ?? ''} of ${dataDir} still runs 1s after SIGTERM (see its log); \`kill -9 ${stuck.pid ?? ''}\`, then egress down again`,
    );
  });
});
