import { readFile, realpath, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { ConfigError, EgressError } from '../errors.ts';
import type { Logger } from '../logging.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { ensurePrivateDir, PRIVATE_FILE_MODE, readOrCreateSecret, tightenTree } from './private-files.ts';
import { commandLineOf, exeAndCwdOf, isAlive, processesIn, startTicksOf, stillRunning } from './process-info.ts';
import { freePort, portIsFree, startRedisChild, type RedisChild, type RedisExit } from './redis-server.ts';

/** `<dataDir>/redis/server.json`: the last private redis-server of this data directory. */
interface ServerRecord {
  pid: number;
  startTicks: number | undefined;
  port: number;
  ownerPid: number;
  ownerStartTicks: number | undefined;
}

export const PASSWORD_FILE = 'password';
export const SERVER_RECORD = 'server.json';

export interface PrivateRedisOptions {
  dataDir: string;
  /** How this process was started (its command line), shown to a second starter. */
  command: string;
  logger: Logger;
  appendOnly?: boolean;
  binary?: string;
  /** See RedisChildOptions.dieWithOwner; tests turn it off to make an orphan. */
  dieWithOwner?: boolean;
  signal?: AbortSignal;
}

export interface PrivateRedis {
  /** Carries the password: for connections only, never for logs. */
  readonly url: string;
  readonly displayUrl: string;
  readonly port: number;
  readonly pid: number;
  readonly dir: string;
  readonly diesWithOwner: boolean;
  /** Resolves when redis-server has exited: after close(), or on its own (killed, crashed). */
  readonly exited: Promise<RedisExit>;
  /** Stops redis-server, then releases the data directory. */
  close(): Promise<void>;
}

async function readRecord(file: string): Promise<ServerRecord | undefined> {
  try {
    const v = JSON.parse(await readFile(file, 'utf8')) as Partial<ServerRecord>;
    const int = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x > 0;
    if (!int(v.pid) || !int(v.port) || v.port > 65535 || !int(v.ownerPid)) return undefined;
    const ticks = (x: unknown): number | undefined => (typeof x === 'number' ? x : undefined);
    return { pid: v.pid, startTicks: ticks(v.startTicks), port: v.port, ownerPid: v.ownerPid, ownerStartTicks: ticks(v.ownerStartTicks) };
  } catch {
    return undefined;
  }
}

/**
 * True only when `record.pid` is provably the redis-server recorded there: same start time, a
 * redis executable, working directory this data directory's `redis/` (redis-server changes to
 * its `dir`), and, when its title shows one, the recorded port. Anything less and it is left alone.
 */
async function isRecordedRedis(record: ServerRecord, redisDir: string): Promise<boolean> {
  if (record.startTicks === undefined || !stillRunning({ pid: record.pid, startTicks: record.startTicks })) return false;
  if (startTicksOf(record.pid) !== record.startTicks) return false;
  const { exe, cwd } = await exeAndCwdOf(record.pid);
  if (exe === undefined || cwd === undefined || !basename(exe).startsWith('redis')) return false;
  if (cwd !== (await realpath(redisDir))) return false;
  const title = await commandLineOf(record.pid);
  return title === undefined || !/:\d+/.test(title) || title.includes(`:${record.port}`);
}

async function waitUntilGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/** SIGTERM (redis-server flushes its append-only file and exits), SIGKILL after 10 s. */
async function stopProcesses(pids: readonly number[], redisDir: string): Promise<void> {
  const signal = (pid: number, sig: NodeJS.Signals): void => {
    try {
      process.kill(pid, sig);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  };
  for (const pid of pids) signal(pid, 'SIGTERM');
  const stubborn: number[] = [];
  for (const pid of pids) if (!(await waitUntilGone(pid, 10_000))) stubborn.push(pid);
  for (const pid of stubborn) signal(pid, 'SIGKILL');
  for (const pid of stubborn) {
    if (!(await waitUntilGone(pid, 5000))) throw new EgressError('ERR_DATA_DIR', `the orphaned redis-server pid ${pid} of ${redisDir} does not stop`);
  }
}

/**
 * Redis servers a dead owner left running on this data directory (killed where the kernel could
 * not be asked to stop them with it, or by an older release): two servers on one append-only file
 * corrupt it, so they are shut down before a new one starts. One is recognised by the record
 * (pid, start time, a redis executable, working directory `redis/` — redis-server changes to its
 * `dir`) or, on Linux, by being a redis process working in this 0700 directory. A recorded pid
 * that is now another program is left alone; where the system cannot tell (no /proc), the start
 * stops and says so rather than guess.
 */
async function stopOrphans(record: ServerRecord | undefined, redisDir: string, recordFile: string, logger: Logger): Promise<number[]> {
  const orphans = new Set<number>();
  if (record && isAlive(record.pid)) {
    if (record.ownerPid !== process.pid && stillRunning({ pid: record.ownerPid, startTicks: record.ownerStartTicks })) {
      throw new EgressError(
        'ERR_DATA_DIR',
        `the private redis-server of ${redisDir} (pid ${record.pid}) still belongs to the running process ${record.ownerPid}`,
      );
    }
    if (record.startTicks === undefined || startTicksOf(process.pid) === undefined) {
      throw new EgressError(
        'ERR_DATA_DIR',
        `the last private redis-server of ${redisDir} may still run as pid ${record.pid} and this system cannot tell: stop it, or delete ${recordFile} if pid ${record.pid} is another program`,
      );
    }
    if (await isRecordedRedis(record, redisDir)) orphans.add(record.pid);
    else logger.debug({ redisPid: record.pid }, 'the recorded redis-server pid now belongs to another process: left alone');
  }
  for (const pid of await processesIn(await realpath(redisDir), 'redis')) orphans.add(pid);
  if (orphans.size === 0) return [];
  logger.warn({ redisPids: [...orphans], ownerPid: record?.ownerPid }, 'stopping the private redis-server its dead owner left running');
  await stopProcesses([...orphans], redisDir);
  return [...orphans];
}

/**
 * `egress down`: stops the private redis-server of `dataDir` that no running owner holds (its
 * owner was killed where the kernel could not stop it with it). Returns the pids stopped (none
 * when nothing was left); throws, as a start would, when its owner still runs or it will not stop.
 */
export async function stopLeftoverRedis(dataDir: string, logger: Logger): Promise<number[]> {
  const dir = join(dataDir, 'redis');
  try {
    await realpath(dir);
  } catch {
    return [];
  }
  const recordFile = join(dir, SERVER_RECORD);
  return stopOrphans(await readRecord(recordFile), dir, recordFile, logger);
}

/**
 * `egress up`'s own Redis: takes the data directory (one owner at a time), stops a redis-server
 * a dead owner left behind, then starts one with the data directory's password (0600, made once)
 * on the port it had before when that is free — remote proxies are told the Redis address as a
 * listener to refuse, and a new port at every start would change their policy.
 */
export async function startPrivateRedis(options: PrivateRedisOptions): Promise<PrivateRedis> {
  const { dataDir, logger } = options;
  const dir = join(dataDir, 'redis');
  try {
    await ensurePrivateDir(dataDir);
  } catch (err) {
    // A data directory that cannot be made private is a configuration problem (exit 2), named as such.
    throw new ConfigError('--data-dir', (err as Error).message, { cause: err });
  }
  const lock = await lockDataDir(dataDir, options.command);
  let child: RedisChild | undefined;
  try {
    if (lock.replaced)
      logger.warn({ ownerPid: lock.replaced.pid, startedAt: lock.replaced.startedAt }, 'the previous owner of the data directory died without releasing it');
    await ensurePrivateDir(dir);
    const loosened = await tightenTree(dir);
    if (loosened.length > 0) logger.warn({ files: loosened }, 'made files of the private Redis readable by this user only');
    const recordFile = join(dir, SERVER_RECORD);
    const previous = await readRecord(recordFile);
    await stopOrphans(previous, dir, recordFile, logger);
    const password = await readOrCreateSecret(join(dir, PASSWORD_FILE));
    const me = { pid: process.pid, startTicks: startTicksOf(process.pid) };
    const start = async (port: number): Promise<RedisChild> =>
      startRedisChild({
        dir,
        appendOnly: options.appendOnly ?? true,
        password,
        port,
        ...(options.binary ? { binary: options.binary } : {}),
        ...(options.dieWithOwner === undefined ? {} : { dieWithOwner: options.dieWithOwner }),
        ...(options.signal ? { signal: options.signal } : {}),
        onSpawn: async (pid) => {
          const record: ServerRecord = { pid, startTicks: startTicksOf(pid), port, ownerPid: me.pid, ownerStartTicks: me.startTicks };
          await writeFile(recordFile, `${JSON.stringify(record)}\n`, { mode: PRIVATE_FILE_MODE });
        },
      });
    const reuse = previous && (await portIsFree(previous.port)) ? previous.port : undefined;
    if (previous && reuse === undefined) logger.warn({ port: previous.port }, 'the private Redis port of the last start is taken: using another one');
    try {
      child = await start(reuse ?? (await freePort()));
    } catch (err) {
      // The port was free a moment ago; someone took it in between. Once more on a fresh one.
      if (!/Address already in use/i.test((err as Error).message)) throw err;
      logger.warn({ port: reuse }, 'the private Redis port was taken meanwhile: using another one');
      child = await start(await freePort());
    }
    const c = child;
    let closing: Promise<void> | undefined;
    return {
      url: c.url,
      displayUrl: c.displayUrl,
      port: c.port,
      pid: c.pid,
      dir,
      diesWithOwner: c.diesWithOwner,
      exited: c.exited,
      close() {
        closing ??= (async () => {
          try {
            await c.stop();
          } finally {
            await lock.release();
          }
        })();
        return closing;
      },
    };
  } catch (err) {
    await child?.stop();
    await lock.release();
    throw err;
  }
}
