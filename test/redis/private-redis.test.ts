import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, test } from 'vitest';
import { ROOT, spawnEgress, type EgressProcess, localApiHeaders } from '../support/cli.ts';
import { waitFor } from '../support/wait.ts';

// `egress up` processes with their own private Redis: REDIS_URL empty means "start one".
const OWN_REDIS = { REDIS_URL: '' };
const HARNESS = resolve(ROOT, 'test/support/up-harness.ts');

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-private-redis-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A config file and a data directory (not yet created) inside a fresh temp dir. */
async function setup(config = 'providers: []\n'): Promise<{ dataDir: string; config: string }> {
  const dir = await tempDir();
  await writeFile(join(dir, 'egress.yaml'), config);
  return { dataDir: join(dir, 'data'), config: join(dir, 'egress.yaml') };
}

interface Up {
  proc: EgressProcess;
  api: string;
  /** The Authorization header of the data directory's own API token. */
  headers: { authorization: string };
}

/** Starts `egress up` (or a harness taking its flags) and waits until it says it is up. */
async function up(s: { dataDir: string; config: string }, extra: string[] = [], script?: string, env: Record<string, string> = {}): Promise<Up> {
  const proc = spawnEgress(
    ['up', '--data-dir', s.dataDir, '--config', s.config, '--port', '0', '--queues', 'checks', ...extra],
    { ...OWN_REDIS, ...env },
    script,
  );
  cleanups.push(async () => {
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
    await proc.exited;
  });
  await proc.waitForLog('egress is up: API ');
  const api = /egress is up: API (http:\/\/\S+?),/.exec(proc.logs())?.[1];
  if (!api) throw new Error(`no API URL in:\n${proc.logs()}`);
  return { proc, api, headers: await localApiHeaders(s.dataDir) };
}

interface ServerRecord {
  pid: number;
  port: number;
}

async function serverRecord(dataDir: string): Promise<ServerRecord> {
  return JSON.parse(await readFile(join(dataDir, 'redis', 'server.json'), 'utf8')) as ServerRecord;
}

/** Running (not zombie) processes whose working directory is this data directory's redis/: its redis-servers. */
async function redisServersOf(dataDir: string): Promise<number[]> {
  const dir = await realpath(join(dataDir, 'redis'));
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if ((await readlink(`/proc/${entry}/cwd`)) !== dir) continue;
      const statLine = await readFile(`/proc/${entry}/stat`, 'utf8');
      if (statLine.slice(statLine.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if ((await readFile(`/proc/${entry}/cmdline`, 'utf8')).includes('redis')) pids.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to look at
    }
  }
  return pids;
}

async function connect(url: string): Promise<Redis> {
  // No ready check: it would fail (and close the connection) before the test sees NOAUTH itself.
  const redis = new Redis(url, { lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  cleanups.push(async () => redis.disconnect());
  await redis.connect();
  return redis;
}

function mode(path: string): Promise<string> {
  return stat(path).then((s) => (s.mode & 0o777).toString(8));
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    out.push(p);
    if (e.isDirectory()) out.push(...(await filesUnder(p)));
  }
  return out;
}

async function applyProxy({ api, headers }: Up, name: string): Promise<void> {
  const res = await fetch(`${api}/v1/proxies`, {
    method: 'POST',
    headers: { 'content-type': 'application/yaml', ...headers },
    body: `kind: Proxy\nmetadata: { name: ${name} }\nspec: { provider: local }\n`,
  });
  expect(res.status, await res.clone().text()).toBe(200);
}

describe('the private Redis of `egress up`', () => {
  test('has a password from a 0600 file, keeps its data dir 0700 and its files 0600, and never shows the password', async () => {
    const s = await setup('providers:\n  - { name: local, type: local }\n');
    // A data directory an earlier release left readable by everyone.
    await mkdir(join(s.dataDir, 'redis', 'appendonlydir'), { recursive: true, mode: 0o755 });
    await writeFile(join(s.dataDir, 'redis', 'appendonlydir', 'old.aof'), 'x', { mode: 0o644 });
    const started = await up(s);
    const { proc, api } = started;
    const record = await serverRecord(s.dataDir);
    const password = (await readFile(join(s.dataDir, 'redis', 'password'), 'utf8')).trim();
    expect(password.length).toBeGreaterThanOrEqual(32);

    // Without the password, Redis refuses; with it, it answers.
    const anonymous = await connect(`redis://127.0.0.1:${record.port}`);
    await expect(anonymous.ping()).rejects.toThrow(/NOAUTH/);
    const authed = await connect(`redis://:${encodeURIComponent(password)}@127.0.0.1:${record.port}`);
    expect(await authed.ping()).toBe('PONG');
    expect(await authed.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);

    // Every role of the process uses it: the API answers from Redis, the scheduler led.
    const ready = await fetch(`${api}/readyz`, { headers: started.headers });
    expect(ready.status).toBe(200);
    await proc.waitForLog('scheduler synced');

    // Written data reaches the append-only file, which only this user can read.
    await applyProxy(started, 'web-1');
    // A rewrite makes redis-server create new files (base, incremental, manifest): they get its umask too.
    await authed.bgrewriteaof();
    await waitFor(
      'the AOF rewrite to finish',
      async () => /aof_rewrite_in_progress:0\r\n[\s\S]*aof_rewrite_scheduled:0/.test(await authed.info('persistence')),
      10_000,
    );
    expect(await mode(s.dataDir)).toBe('700');
    expect(await mode(join(s.dataDir, 'redis'))).toBe('700');
    const files = await filesUnder(join(s.dataDir, 'redis'));
    expect(files.some((f) => f.endsWith('.aof'))).toBe(true);
    for (const f of files) {
      expect([f, await mode(f)]).toEqual([f, (await stat(f)).isDirectory() ? '700' : '600']);
    }
    expect(await mode(join(s.dataDir, 'egress.lock'))).toBe('600');

    // Not on redis-server's command line (`ps`), not in any log line.
    const cmdline = await readFile(`/proc/${record.pid}/cmdline`, 'utf8');
    expect(cmdline).not.toContain(password);
    expect(proc.logs()).not.toContain(password);
    expect(proc.logs()).toContain('"url":"redis://:[redacted]@127.0.0.1:');
    expect(await proc.stop()).toBe(0);
  });

  test('kill -9 of `egress up`: its redis-server goes too; a second up on a live data dir exits 2 naming the pid; the next start keeps data and port', async () => {
    const s = await setup('providers:\n  - { name: local, type: local }\n');
    const first = await up(s);
    await applyProxy(first, 'kept');
    const before = await serverRecord(s.dataDir);
    const password = (await readFile(join(s.dataDir, 'redis', 'password'), 'utf8')).trim();

    // A second `egress up` on the same data directory, while the first runs.
    const second = spawnEgress(['up', '--data-dir', s.dataDir, '--config', s.config, '--port', '0'], OWN_REDIS);
    expect(await second.exited).toBe(2);
    expect(second.logs()).toContain(`error: --data-dir: ${s.dataDir} is in use by egress pid ${first.proc.child.pid} (started `);
    expect(second.logs()).toContain(`up --data-dir ${s.dataDir}`);
    expect(await redisServersOf(s.dataDir)).toEqual([before.pid]);

    first.proc.child.kill('SIGKILL');
    await first.proc.exited;
    await waitFor('the redis-server of the killed owner to stop', async () => (await redisServersOf(s.dataDir)).length === 0, 5000);

    const third = await up(s);
    const after = await serverRecord(s.dataDir);
    expect(after.port).toBe(before.port);
    expect(after.pid).not.toBe(before.pid);
    const res = await fetch(`${third.api}/v1/proxies/kept`, { headers: third.headers });
    expect(res.status).toBe(200);
    // The password is the one made at the first start.
    expect((await readFile(join(s.dataDir, 'redis', 'password'), 'utf8')).trim()).toBe(password);
    expect(await third.proc.stop()).toBe(0);
    expect(await redisServersOf(s.dataDir)).toEqual([]);
  });

  test('without the parent-death signal, the orphaned redis-server is stopped by the next start, never run twice', async () => {
    const s = await setup();
    const first = await up(s, [], HARNESS, { NO_PDEATHSIG: '1' });
    expect(first.proc.logs()).toContain('setpriv --pdeathsig is not available');
    const before = await serverRecord(s.dataDir);
    const password = (await readFile(join(s.dataDir, 'redis', 'password'), 'utf8')).trim();
    const orphanClient = await connect(`redis://:${password}@127.0.0.1:${before.port}`);
    await orphanClient.set('{marker}:kept', 'yes');
    orphanClient.disconnect();

    first.proc.child.kill('SIGKILL');
    await first.proc.exited;
    // The orphan this test is about: still serving after its owner died.
    expect(await redisServersOf(s.dataDir)).toEqual([before.pid]);
    cleanups.push(async () => {
      if ((await redisServersOf(s.dataDir).catch((): number[] => [])).includes(before.pid)) process.kill(before.pid, 'SIGKILL');
    });

    const next = await up(s);
    expect(next.proc.logs()).toContain('stopping the private redis-server its dead owner left running');
    const after = await serverRecord(s.dataDir);
    expect(await redisServersOf(s.dataDir)).toEqual([after.pid]);
    expect(after.pid).not.toBe(before.pid);
    expect(after.port).toBe(before.port);
    const client = await connect(`redis://:${password}@127.0.0.1:${after.port}`);
    expect(await client.get('{marker}:kept')).toBe('yes');
    expect(await next.proc.stop()).toBe(0);
  });

  test('an orphan without a record (an older release, a lost server.json) is found by its directory and stopped', async () => {
    const s = await setup();
    const first = await up(s, [], HARNESS, { NO_PDEATHSIG: '1' });
    const before = await serverRecord(s.dataDir);
    first.proc.child.kill('SIGKILL');
    await first.proc.exited;
    cleanups.push(async () => {
      if ((await redisServersOf(s.dataDir).catch((): number[] => [])).includes(before.pid)) process.kill(before.pid, 'SIGKILL');
    });
    await rm(join(s.dataDir, 'redis', 'server.json'));
    expect(await redisServersOf(s.dataDir)).toEqual([before.pid]);

    const next = await up(s);
    const after = await serverRecord(s.dataDir);
    expect(await redisServersOf(s.dataDir)).toEqual([after.pid]);
    expect(next.proc.logs()).toContain(`"redisPids":[${before.pid}]`);
    expect(await next.proc.stop()).toBe(0);
  });

  test('two `egress up` started at once on one data directory: one runs, the other exits 2', async () => {
    const s = await setup();
    const args = ['up', '--data-dir', s.dataDir, '--config', s.config, '--port', '0', '--queues', 'checks'];
    const a = spawnEgress(args, OWN_REDIS);
    const b = spawnEgress(args, OWN_REDIS);
    for (const p of [a, b]) {
      cleanups.push(async () => {
        if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
        await p.exited;
      });
    }
    const loser = await Promise.race([a.exited.then(() => a), b.exited.then(() => b)]);
    const winner = loser === a ? b : a;
    expect(await loser.exited).toBe(2);
    expect(loser.logs()).toContain(`is in use by egress pid ${winner.child.pid} (started `);
    await winner.waitForLog('egress is up: API ');
    expect(await redisServersOf(s.dataDir)).toHaveLength(1);
    expect(await winner.stop()).toBe(0);
  });

  test('a shared (sticky, like /tmp) directory as the data dir is refused with exit 2, and left as it was', async () => {
    const s = await setup();
    await mkdir(s.dataDir, { mode: 0o755 });
    await chmod(s.dataDir, 0o1777);
    const run = spawnEgress(['up', '--data-dir', s.dataDir, '--config', s.config, '--port', '0'], OWN_REDIS);
    expect(await run.exited).toBe(2);
    expect(run.logs()).toBe(
      `error: --data-dir: ${s.dataDir} is owned by uid ${process.getuid?.()} with mode 1777; it must be owned by uid ${process.getuid?.()} and not writable by group or others (a shared directory, like /tmp: use a directory of its own inside it)\n`,
    );
    expect((await stat(s.dataDir)).mode & 0o7777).toBe(0o1777);
  });

  test('Ctrl-C (SIGINT to the whole process group) with a check in flight: redis-server outlives the roles, whose shutdown ends cleanly', async () => {
    const s = await setup('providers:\n  - { name: local, type: local }\n');
    // As a terminal runs it: a process group of its own, which Ctrl-C signals as a whole.
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', HARNESS, 'up', '--data-dir', s.dataDir, '--config', s.config, '--port', '0', '--queues', 'checks', '--shutdown-grace', '500ms'],
      {
        cwd: ROOT,
        env: { ...process.env, ...OWN_REDIS, EGRESS_LOG_LEVEL: 'debug', HANG_PROVIDERS: 'local' },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      },
    );
    const exited = once(child, 'exit');
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    });
    let logs = '';
    child.stderr.on('data', (chunk: Buffer) => void (logs += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => void (logs += chunk.toString()));
    await waitFor('a check of local to be running', () => logs.includes('CHECK_STARTED local'), 30_000);
    process.kill(-(child.pid ?? 0), 'SIGINT');
    const [code] = (await exited) as [number | null];
    // The worker aborted the hanging check after the grace and handed its job back: that needs Redis.
    expect(logs).toContain('"msg":"stopped"');
    expect(logs).not.toMatch(/ECONNREFUSED|Connection is closed|"msg":"worker error"|error while shutting down/);
    expect(code).toBe(0);
    expect(await redisServersOf(s.dataDir)).toEqual([]);
  });

  test('a recorded pid that now belongs to another program is left alone', async () => {
    const s = await setup();
    const first = await up(s);
    const before = await serverRecord(s.dataDir);
    expect(await first.proc.stop(), first.proc.logs()).toBe(0);
    // Another program got the pid space meanwhile: point the record at it, as if pids were reused.
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    cleanups.push(async () => {
      if (other.exitCode === null && other.signalCode === null) {
        other.kill('SIGKILL');
        await once(other, 'exit');
      }
    });
    const otherPid = other.pid ?? -1;
    await writeFile(join(s.dataDir, 'redis', 'server.json'), JSON.stringify({ ...before, pid: otherPid }));
    const next = await up(s);
    expect(other.exitCode).toBeNull();
    expect(other.signalCode).toBeNull();
    expect(() => process.kill(otherPid, 0)).not.toThrow();
    expect(await next.proc.stop()).toBe(0);
  });
});
