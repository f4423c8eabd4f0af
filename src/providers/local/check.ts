import { randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { truncateMessage } from '../../health/message.ts';
import type { TargetResult } from '../../health/types.ts';

export const LOCAL_TARGET = 'localhost';

async function probeWritable(dir: string, signal: AbortSignal): Promise<void> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, `.health-${randomUUID()}`);
  await writeFile(file, 'ok', { signal });
  await rm(file, { force: true });
}

async function probeListener(signal: AbortSignal): Promise<number> {
  signal.throwIfAborted();
  const server = createServer();
  try {
    return await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: 0, host: '127.0.0.1', signal }, () => {
        const address = server.address();
        resolve(typeof address === 'object' && address ? address.port : 0);
      });
    });
  } finally {
    if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/**
 * The local provider's check: its data directory is writable and a loopback listener can be
 * opened (the two things a local forward proxy needs). Once `signal` has ended, a failure is
 * `Timeout`, whatever the step said.
 */
export async function checkLocal(dataDir: string, signal: AbortSignal): Promise<TargetResult[]> {
  const started = performance.now();
  const details: Record<string, string> = { dataDir, listenAddress: '127.0.0.1' };
  const done = (ready: boolean, message: string): TargetResult[] => [
    {
      target: LOCAL_TARGET,
      ready,
      reason: ready ? 'Ok' : 'Error',
      message: truncateMessage(message),
      details,
      durationSeconds: (performance.now() - started) / 1000,
    },
  ];
  const failed = (step: string, what: string, err: unknown): TargetResult[] => {
    if (!signal.aborted) return done(false, `${what}: ${(err as Error).message}`);
    const [timedOut] = done(false, `the check deadline passed while checking ${step}`);
    return [{ ...timedOut!, reason: 'Timeout' }];
  };
  try {
    await probeWritable(dataDir, signal);
  } catch (err) {
    return failed(`the data directory ${dataDir}`, `data directory ${dataDir} is not writable`, err);
  }
  try {
    const port = await probeListener(signal);
    details.probedPort = String(port);
  } catch (err) {
    return failed('a loopback listener on 127.0.0.1', 'cannot open a loopback listener on 127.0.0.1', err);
  }
  return done(true, 'data directory writable, loopback listener opened');
}
