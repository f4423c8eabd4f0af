import { chmod, chown, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, test } from 'vitest';
import { findCause } from '../../src/errors.ts';
import { UnsafePathError } from '../../src/fs/private-path.ts';
import type { Instance, InstanceSpec } from '../../src/providers/lifecycle.ts';
import { createLocalLifecycle, type LocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { findHostProcesses, isHostProcess } from '../../src/providers/local/process-table.ts';
import { bundleProxyHostProgram } from '../../src/providers/local/proxy-program.ts';
import { runCli, spawnEgress, type EgressProcess } from '../support/cli.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

// Issue 21: a provider dataDir another user made (or can write into) was adopted as it was, and a
// restarted proxy host ran bin/proxy-host.cjs from it without rebuilding it — their code, as us.
// The tests run as root; the hostile directories belong to nobody (uid 65534).

const NOBODY = 65534;
const ME = process.getuid?.() ?? 0;
const RULE = `it must be owned by uid ${ME} and not writable by group or others`;
const signal = (): AbortSignal => AbortSignal.timeout(30_000);
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function dir(path: string, mode: number, uid = ME): Promise<string> {
  await mkdir(path, { recursive: true });
  await chown(path, uid, uid);
  await chmod(path, mode);
  return path;
}

async function configWith(base: string, dataDir: string): Promise<string> {
  const file = join(base, 'c.yaml');
  await writeFile(file, `providers:\n  - {name: local, type: local, dataDir: ${JSON.stringify(dataDir)}}\n`);
  return file;
}

/** `/tmp/shared` (root's, 1777) with `/tmp/shared/evil` nobody made 0777, as in the issue. */
async function hostileDataDir(): Promise<{ base: string; evil: string }> {
  const base = await tempDir('egress-datadir-');
  const shared = await dir(join(base, 'shared'), 0o1777, 0);
  return { base, evil: await dir(join(shared, 'evil'), 0o777, NOBODY) };
}

describe('a provider dataDir that another user owns or can write into is refused at start', () => {
  test('egress up --check-config: exit 2, one line naming the field, the path, its owner and mode', async () => {
    const { base, evil } = await hostileDataDir();
    const config = await configWith(base, evil);
    expect(await runCli(['up', '--check-config', '--config', config, '--data-dir', join(base, 'x')])).toEqual({
      code: 2,
      out: '',
      err: `error: providers[0].dataDir: ${evil} is owned by uid ${NOBODY} with mode 0777; ${RULE}\n`,
    });
    // Checked, not changed: nothing was made in it.
    expect((await stat(evil)).mode & 0o7777).toBe(0o777);
    await expect(stat(join(evil, 'bin'))).rejects.toThrow(/ENOENT/);
  });

  test('egress worker (a real start) exits 2 before it starts anything', async () => {
    const { base, evil } = await hostileDataDir();
    const config = await configWith(base, join(evil, 'state'));
    const worker: EgressProcess = spawnEgress(['worker', '--config', config, '--data-dir', join(base, 'x')], { REDIS_URL: inject('redisUrl') });
    cleanups.push(async () => void (await worker.stop()));
    expect(await worker.exited).toBe(2);
    expect(worker.logs()).toBe(
      `error: providers[0].dataDir: ${evil} is owned by uid ${NOBODY} with mode 0777; every directory above ${join(evil, 'state')} must be owned by uid 0 and not writable by group or others (a sticky directory owned by uid 0, like /tmp, excepted)\n`,
    );
    await expect(stat(join(evil, 'state'))).rejects.toThrow(/ENOENT/);
  });

  test('the variant: a root-owned sticky dataDir, or one of ours where nobody pre-created bin/ 0777, is refused', async () => {
    const base = await tempDir('egress-datadir-');
    const sticky = await dir(join(base, 'sticky'), 0o1777, 0);
    await dir(join(sticky, 'bin'), 0o777, NOBODY);
    expect((await runCli(['up', '--check-config', '--config', await configWith(base, sticky), '--data-dir', join(base, 'x')])).err).toBe(
      `error: providers[0].dataDir: ${sticky} is owned by uid 0 with mode 1777; ${RULE} (a shared directory, like /tmp: use a directory of its own inside it)\n`,
    );
    const ours = await dir(join(base, 'ours'), 0o700);
    const bin = await dir(join(ours, 'bin'), 0o777, NOBODY);
    expect(await runCli(['up', '--check-config', '--config', await configWith(base, ours), '--data-dir', join(base, 'x')])).toMatchObject({
      code: 2,
      err: `error: providers[0].dataDir: ${bin} is owned by uid ${NOBODY} with mode 0777; ${RULE}\n`,
    });
  });

  test('--data-dir below a directory another user can write into is refused too', async () => {
    const base = await tempDir('egress-datadir-');
    const open = await dir(join(base, 'open'), 0o777, NOBODY);
    expect(await runCli(['up', '--check-config', '--data-dir', join(open, 'egress')], {})).toMatchObject({
      code: 2,
      err: `error: --data-dir: ${open} is owned by uid ${NOBODY} with mode 0777; every directory above ${join(open, 'egress')} must be owned by uid 0 and not writable by group or others (a sticky directory owned by uid 0, like /tmp, excepted)\n`,
    });
  });
});

/** A proxy answers: 407 without credentials. */
function proxyAnswers(port: number): Promise<number> {
  return new Promise((resolveStatus, reject) => {
    const req = request({ host: '127.0.0.1', port, path: 'http://example.invalid/', agent: false }, (res) => {
      res.resume();
      resolveStatus(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the proxy host program is verified right before each exec', () => {
  const spec: InstanceSpec = { name: 'p1', owner: { fleet: 'fleet-a', proxy: 'proxy-p1' }, credentials: { username: 'u', password: 'secret-pass' } };

  async function started(): Promise<{ base: string; dataDir: string; lifecycle: LocalLifecycle; logs: () => string; first: Instance; marker: string }> {
    const base = await tempDir('egress-datadir-');
    const dataDir = await dir(join(base, 'data'), 0o700);
    let logs = '';
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logs += chunk.toString();
        done();
      },
    });
    const lifecycle = createLocalLifecycle({ dataDir, logger: pino({ level: 'info' }, sink) });
    lifecycle.onInstanceExit(() => undefined);
    cleanups.push(async () => {
      lifecycle.close();
      await lifecycle.deleteInstance('p1', undefined, { owner: spec.owner, nameIsOurs: true }, signal());
      await waitFor('no proxy host left', async () => (await findHostProcesses(dataDir)).length === 0);
    });
    const first = await lifecycle.ensureInstance(spec, signal());
    expect(first.state).toBe('running');
    return { base, dataDir, lifecycle, logs: () => logs, first, marker: join(base, 'marker') };
  }

  /** What an attacker puts in place of the program: it records the uid it ran as. */
  async function replaceProgram(dataDir: string, marker: string, owner = ME): Promise<string> {
    const program = join(dataDir, 'bin', 'proxy-host.cjs');
    const planted = `${program}.planted`;
    await writeFile(planted, `require('node:fs').writeFileSync(${JSON.stringify(marker)}, String(process.getuid()));\n`, { mode: 0o777 });
    await chown(planted, owner, owner);
    await rename(planted, program);
    return program;
  }

  const hostPid = (i: Instance): number => Number(i.id.split(':')[0]);

  test('a replaced bin/proxy-host.cjs is never run: the restarted host runs our own build, and the proxy comes back', async () => {
    const { dataDir, lifecycle, logs, first, marker } = await started();
    const program = await replaceProgram(dataDir, marker);
    process.kill(hostPid(first), 'SIGKILL');
    // The lifecycle restarts the host on its own; it brings p1 back on its port.
    const back = await waitFor('p1 served by a new host', async () => {
      const i = await lifecycle.getInstance('p1', undefined, signal());
      return i?.state === 'running' && hostPid(i) !== hostPid(first) ? i : undefined;
    });
    expect(back.endpoint).toEqual(first.endpoint);
    expect(await isHostProcess(hostPid(back), dataDir)).toBe(true);
    expect(await proxyAnswers(back.endpoint!.port)).toBe(407);
    await expect(stat(marker)).rejects.toThrow(/ENOENT/);
    expect(Buffer.compare(await readFile(program), await bundleProxyHostProgram())).toBe(0);
    expect((await stat(program)).mode & 0o777).toBe(0o600);
    expect(logs()).toContain('the proxy host program on disk was not the one this orchestrator built: rewritten from its own build before starting it');
  });

  test('bin/ made another user’s after start: the restart is refused, the reconcile names path, owner and mode, nothing runs', async () => {
    const { dataDir, lifecycle, logs, first, marker } = await started();
    const bin = join(dataDir, 'bin');
    await replaceProgram(dataDir, marker, NOBODY);
    await chown(bin, NOBODY, NOBODY);
    await chmod(bin, 0o777);
    process.kill(hostPid(first), 'SIGKILL');
    const message = `${bin} is owned by uid ${NOBODY} with mode 0777; ${RULE}`;
    await waitFor('the refused restart logged', () => logs().includes(message));
    const err = await lifecycle.ensureInstance(spec, signal()).catch((e: unknown) => e);
    const unsafe = findCause(err, UnsafePathError);
    expect(unsafe?.message).toBe(message);
    expect(unsafe).toMatchObject({ code: 'ERR_UNSAFE_PATH', path: bin, ownerUid: NOBODY, retryable: false });
    expect(await findHostProcesses(dataDir)).toEqual([]);
    await expect(stat(marker)).rejects.toThrow(/ENOENT/);
  });
});
