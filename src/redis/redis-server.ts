import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { EgressError } from '../errors.ts';
import { ensurePrivateDir } from './private-files.ts';

/** A `redis-server` child process owned by this process. */
export interface RedisChild {
  /** The URL to connect with; it carries the password, so it is never logged (use `displayUrl`). */
  readonly url: string;
  /** The URL with the password replaced, for logs and messages. */
  readonly displayUrl: string;
  readonly port: number;
  readonly pid: number;
  /** True when the kernel stops this redis-server if its owner dies (Linux, util-linux `setpriv`). */
  readonly diesWithOwner: boolean;
  /** Resolves when the process has exited, for whatever reason (stop() included): how it ended. */
  readonly exited: Promise<RedisExit>;
  stop(): Promise<void>;
}

/** How a redis-server process ended: its exit code, or the signal that ended it. */
export interface RedisExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RedisChildOptions {
  /** Directory for the configuration, the append-only files and the log; created 0700 when missing. */
  dir: string;
  /** Append-only persistence (on for `egress up`, off for tests). */
  appendOnly: boolean;
  /** The binary; `redis-server` from PATH by default. */
  binary?: string;
  port?: number;
  /** `requirepass`: clients must authenticate. It reaches redis-server through a 0600 file, never its command line. */
  password?: string;
  /**
   * Have the kernel send redis-server SIGTERM when this process dies, even by `kill -9`
   * (`setpriv --pdeathsig TERM`). On by default; ignored where `setpriv` lacks `--pdeathsig`.
   */
  dieWithOwner?: boolean;
  /**
   * More redis.conf lines, after ours (a later line wins): a cluster node's or a TLS listener's
   * settings. They go in the 0600 file, so secrets such as `masterauth` stay off the command line.
   */
  extraConfig?: readonly string[];
  /** Called with the pid as soon as the process exists, before it is ready (to record it). */
  onSpawn?: (pid: number) => Promise<void>;
  signal?: AbortSignal;
}

export class RedisBinaryMissingError extends EgressError {
  constructor(binary: string, cause: unknown) {
    super(
      'ERR_REDIS_BINARY_MISSING',
      `cannot start ${binary}: not found. Install it (Debian: apt-get install redis-server) or set REDIS_URL to a running Redis`,
      { cause },
    );
  }
}

/** Asks the kernel for a free loopback port. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** True when `port` can be bound on 127.0.0.1 right now. */
export async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

let pdeathsigSupport: Promise<boolean> | undefined;

/** Whether util-linux `setpriv` with `--pdeathsig` is on this machine (Linux only; asked once). */
export function parentDeathSignalSupported(): Promise<boolean> {
  pdeathsigSupport ??= new Promise((resolve) => {
    if (process.platform !== 'linux') {
      resolve(false);
      return;
    }
    execFile('setpriv', ['--help'], { timeout: 5000 }, (err, stdout) => resolve(!err && stdout.includes('--pdeathsig')));
  });
  return pdeathsigSupport;
}

/** A value in redis.conf syntax: double-quoted, with the characters that need it escaped. */
export function confString(value: string): string {
  if (/[\r\n\0]/.test(value)) throw new EgressError('ERR_REDIS_START', `cannot put ${JSON.stringify(value)} in redis.conf: it holds a line break`);
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

export const REDIS_CONF = 'redis.conf';

/**
 * Runs `fn` (which must spawn synchronously) with the process umask set to `mask`, so the child
 * starts with it: redis-server creates its append-only and RDB files with the umask it inherits.
 * Node spawns by fork+exec inside the call, so nothing else runs under the narrow mask meanwhile
 * but the thread pool's file creations, which this process does not make while starting Redis.
 */
function withUmask<T>(mask: number, fn: () => T): T {
  let previous: number;
  try {
    previous = process.umask(mask);
  } catch {
    // A worker thread may not change the umask; the 0700 directories still keep others out.
    return fn();
  }
  try {
    return fn();
  } finally {
    process.umask(previous);
  }
}

/**
 * Starts a private `redis-server` on loopback and resolves once it accepts connections (it
 * prints "Ready to accept connections"). `noeviction` as BullMQ requires. Its configuration,
 * password included, is a 0600 file in `dir`; it runs under umask 077, so every file it writes
 * is 0600 in a 0700 directory.
 */
export async function startRedisChild(options: RedisChildOptions): Promise<RedisChild> {
  await ensurePrivateDir(options.dir);
  const port = options.port ?? (await freePort());
  const binary = options.binary ?? 'redis-server';
  const conf = join(options.dir, REDIS_CONF);
  const lines = [
    '# Written by egress at every start; edits are lost.',
    'bind 127.0.0.1',
    `port ${port}`,
    `dir ${confString(options.dir)}`,
    'save ""',
    `appendonly ${options.appendOnly ? 'yes' : 'no'}`,
    'appendfsync everysec',
    'maxmemory-policy noeviction',
    'protected-mode yes',
    'daemonize no',
    'logfile ""',
    ...(options.password === undefined ? [] : [`requirepass ${confString(options.password)}`]),
    ...(options.extraConfig ?? []),
  ];
  await writeFile(conf, `${lines.join('\n')}\n`, { mode: 0o600 });
  const diesWithOwner = options.dieWithOwner !== false && (await parentDeathSignalSupported());
  const [command, args] = diesWithOwner ? ['setpriv', ['--pdeathsig', 'TERM', '--', binary, conf]] : [binary, [conf]];
  // A session of its own (detached): Ctrl-C in a terminal signals the whole foreground process
  // group, and redis-server must outlive the roles' shutdown, which still writes to it. It stays
  // this process's child: stop() ends it, and the parent-death signal still applies.
  const child: ChildProcess = withUmask(0o077, () => spawn(command, args, { cwd: options.dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true }));
  const stdout = child.stdout;
  const stderr = child.stderr;
  if (!stdout || !stderr) throw new EgressError('ERR_REDIS_START', 'redis-server started without output pipes');
  const exited = new Promise<RedisExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const recorded = child.pid !== undefined && options.onSpawn ? options.onSpawn(child.pid) : Promise.resolve();
  // A recording failure is reported after the start settles; never an unhandled rejection meanwhile.
  recorded.catch(() => undefined);
  try {
    await new Promise<void>((resolve, reject) => {
      let output = '';
      const onData = (chunk: Buffer): void => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) {
          cleanup();
          resolve();
        }
      };
      const onError = (err: NodeJS.ErrnoException): void => {
        cleanup();
        reject(err.code === 'ENOENT' ? new RedisBinaryMissingError(err.path ?? command, err) : err);
      };
      const onExit = (code: number | null): void => {
        cleanup();
        // 127: setpriv (or a shell) could not find the binary to execute.
        if (code === 127) reject(new RedisBinaryMissingError(binary, new Error(output.trim())));
        else reject(new EgressError('ERR_REDIS_START', `redis-server exited with code ${code}: ${output.trim().split('\n').slice(-3).join(' | ')}`));
      };
      const onAbort = (): void => {
        cleanup();
        child.kill('SIGKILL');
        reject(new EgressError('ERR_REDIS_START', 'redis-server start aborted', { cause: options.signal?.reason }));
      };
      const cleanup = (): void => {
        stdout.off('data', onData);
        stderr.off('data', onData);
        child.off('error', onError);
        child.off('exit', onExit);
        options.signal?.removeEventListener('abort', onAbort);
      };
      stdout.on('data', onData);
      stderr.on('data', onData);
      child.on('error', onError);
      child.on('exit', onExit);
      options.signal?.addEventListener('abort', onAbort, { once: true });
    });
    await recorded;
  } catch (err) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw err;
  }
  stdout.resume();
  stderr.resume();
  let stopping: Promise<void> | undefined;
  const auth = options.password === undefined ? '' : `:${encodeURIComponent(options.password)}@`;
  return {
    url: `redis://${auth}127.0.0.1:${port}`,
    displayUrl: `redis://${auth ? ':[redacted]@' : ''}127.0.0.1:${port}`,
    port,
    pid: child.pid ?? -1,
    diesWithOwner,
    exited,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}
