import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { freezeConfig, type AppConfig, type ReadinessSettings, type StoreSettings } from '../../src/config/app.ts';
import type { ProviderConfig } from '../../src/providers/config.ts';
import { tempDirSync } from './temp-dirs.ts';

/** A hash-tagged prefix of its own for every test, so tests never see each other's keys. */
export function uniquePrefix(): string {
  return `{t-${randomUUID().slice(0, 8)}}`;
}

export interface TestConfigOverrides {
  providers?: ProviderConfig[];
  intervalMs?: number;
  timeoutMs?: number;
  prefix?: string;
  port?: number;
  tokens?: string[];
  maxBodyBytes?: number;
  allowedHosts?: string[];
  concurrency?: number;
  leaseMs?: number;
  dataDir?: string;
  queues?: ('checks' | 'reconcile' | 'gc')[];
  gcIntervalMs?: number;
  resyncMs?: number;
  gcGraceMs?: number;
  gcDeletesPerSecond?: number;
  readiness?: Partial<ReadinessSettings>;
  /** BullMQ's job lock (default 1 s, so that crash tests recover fast); longer where a loaded machine may stall the event loop that long. */
  lockDurationMs?: number;
  eventsMaxCount?: number;
  eventsMaxAgeMs?: number;
  /** Where ProviderHealth and Proxy objects live (default Redis). */
  store?: StoreSettings;
}

/** An AppConfig for in-process tests: the run's Redis, a fresh prefix, short locks and backoff. */
export function testConfig(o: TestConfigOverrides = {}): AppConfig {
  return freezeConfig({
    providers: o.providers ?? [{ name: 'local', type: 'local' }],
    ...(o.store ? { store: o.store } : {}),
    checks: { intervalMs: o.intervalMs ?? 0, timeoutMs: o.timeoutMs ?? 2000 },
    redis: { url: inject('redisUrl'), prefix: o.prefix ?? uniquePrefix() },
    api: { host: '127.0.0.1', port: o.port ?? 0, tokens: o.tokens ?? [], maxBodyBytes: o.maxBodyBytes ?? 1024 * 1024, allowedHosts: o.allowedHosts ?? [] },
    metricsPort: undefined,
    echoUrl: undefined,
    recheckMs: 200,
    resyncMs: o.resyncMs ?? 0,
    readiness: { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 300_000, intervalMs: 5000, timeoutMs: 2000, ...o.readiness },
    gcIntervalMs: o.gcIntervalMs ?? 0,
    gcGraceMs: o.gcGraceMs ?? 600_000,
    gcDeletesPerSecond: o.gcDeletesPerSecond ?? 1000,
    worker: {
      queues: o.queues ?? ['checks'],
      concurrency: o.concurrency ?? 4,
      lockDurationMs: o.lockDurationMs ?? 1000,
      stalledIntervalMs: (o.lockDurationMs ?? 1000) / 2,
    },
    dataDir: o.dataDir ?? tempDirSync('egress-test-data-'),
    logLevel: 'silent',
    shutdownGraceMs: 1000,
    leaseMs: o.leaseMs ?? 600,
    backoffMs: 50,
    retention: { completed: 100, failed: 100 },
    events: { maxCount: o.eventsMaxCount ?? 10_000, maxAgeMs: o.eventsMaxAgeMs ?? 86_400_000 },
  } satisfies AppConfig);
}
