/**
 * Test helpers around the fake: a capturing logger, a bounded poll, and a client opened against a
 * fresh fake over a unix socket.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { Logger } from '../../../src/logging.ts';
import { createLibvirtMetrics } from '../../../src/kvm/libvirt/metrics.ts';
import { openLibvirtConnection, type OpenLibvirtOptions } from '../../../src/kvm/libvirt/open.ts';
import type { LibvirtConnection } from '../../../src/kvm/libvirt/connection.ts';
import { FakeLibvirtServer, type FakeLibvirtServerOptions } from './server.ts';
import type { FakeSession } from './session.ts';

export interface CapturedLogger {
  logger: Logger;
  lines: Record<string, unknown>[];
}

export function captureLogger(level = 'debug'): CapturedLogger {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: pino({ level }, sink), lines };
}

/** Polls `cond` every few milliseconds until it holds; throws after `timeoutMs`. */
export async function waitFor(cond: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

export interface FakeHarness {
  server: FakeLibvirtServer;
  conn: LibvirtConnection;
  session: FakeSession;
  log: CapturedLogger;
  registry: Registry;
}

/** A listening fake plus a client opened on it (uri qemu:///system). */
export async function openOnFake(
  serverOptions: FakeLibvirtServerOptions = {},
  clientOptions: Partial<OpenLibvirtOptions> = {},
  server?: FakeLibvirtServer,
): Promise<FakeHarness> {
  const srv = server ?? new FakeLibvirtServer(serverOptions);
  if (!srv.socketPath) await srv.listen();
  const log = captureLogger();
  const registry = new Registry();
  const sessionP = srv.nextSession();
  const sock = await srv.connect();
  const conn = await openLibvirtConnection(sock, {
    uri: 'qemu:///system',
    signal: AbortSignal.timeout(10_000),
    logger: log.logger,
    metrics: createLibvirtMetrics(registry),
    ...clientOptions,
  });
  return { server: srv, conn, session: await sessionP, log, registry };
}
