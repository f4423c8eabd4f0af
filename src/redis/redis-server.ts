import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { EgressError } from '../errors.ts';

/** A `redis-server` child process owned by this process. */
export interface RedisChild {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

export interface RedisChildOptions {
  /** Directory for the append-only file and the log; created when missing. */
  dir: string;
  /** Append-only persistence (on for `egress up`, off for tests). */
  appendOnly: boolean;
  /** The binary; `redis-server` from PATH by default. */
  binary?: string;
  port?: number;
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

/**
 * Starts a private `redis-server` on a free loopback port and resolves once it accepts
 * connections (it prints "Ready to accept connections"). `noeviction` as BullMQ requires.
 */
export async function startRedisChild(options: RedisChildOptions): Promise<RedisChild> {
  await mkdir(options.dir, { recursive: true });
  const port = options.port ?? (await freePort());
  const binary = options.binary ?? 'redis-server';
  const args = [
    '--bind', '127.0.0.1',
    '--port', String(port),
    '--dir', options.dir,
    '--save', '',
    '--appendonly', options.appendOnly ? 'yes' : 'no',
    '--appendfsync', 'everysec',
    '--maxmemory-policy', 'noeviction',
    '--protected-mode', 'yes',
  ];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
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
      reject(err.code === 'ENOENT' ? new RedisBinaryMissingError(binary, err) : err);
    };
    const onExit = (code: number | null): void => {
      cleanup();
      reject(new EgressError('ERR_REDIS_START', `redis-server exited with code ${code}: ${output.trim().split('\n').slice(-3).join(' | ')}`));
    };
    const onAbort = (): void => {
      cleanup();
      child.kill('SIGKILL');
      reject(new EgressError('ERR_REDIS_START', 'redis-server start aborted', { cause: options.signal?.reason }));
    };
    const cleanup = (): void => {
      child.stdout.off('data', onData);
      child.off('error', onError);
      child.off('exit', onExit);
      options.signal?.removeEventListener('abort', onAbort);
    };
    child.stdout.on('data', onData);
    child.on('error', onError);
    child.on('exit', onExit);
    options.signal?.addEventListener('abort', onAbort, { once: true });
  });
  child.stdout.resume();
  child.stderr.resume();
  let stopping: Promise<void> | undefined;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? -1,
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
