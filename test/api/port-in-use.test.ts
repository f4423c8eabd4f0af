import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { spawnEgress, type EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';

/** The exit code, or a failure after `ms` (the unfixed command never exits). */
function exitWithin(proc: EgressProcess, ms: number): Promise<number | null> {
  return Promise.race([
    proc.exited,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still running after ${ms} ms:\n${proc.logs().slice(-2000)}`)), ms).unref()),
  ]);
}

describe('a second API on a busy port', () => {
  let holder: Server;
  let port: number;
  let dataDir: string;
  const started: EgressProcess[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'egress-port-'));
    holder = createServer();
    holder.listen(0, '127.0.0.1');
    await once(holder, 'listening');
    port = (holder.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const p of started) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await Promise.all(started.map((p) => p.exited));
    await new Promise((resolve) => holder.close(resolve));
    await rm(dataDir, { recursive: true, force: true });
  });

  test.each(['api', 'up'])('egress %s exits 2 naming --port and the address, having closed what it opened', async (command) => {
    const proc = spawnEgress([command, '--port', String(port), '--prefix', uniquePrefix(), '--data-dir', dataDir], {
      REDIS_URL: inject('redisUrl'),
      EGRESS_LOG_LEVEL: 'warn',
    });
    started.push(proc);
    expect(await exitWithin(proc, 45_000)).toBe(2);
    expect(proc.logs()).toContain(`error: --port: 127.0.0.1:${port} is already in use (EADDRINUSE): another process listens there; choose another --port\n`);
  });
});
