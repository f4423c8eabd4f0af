import { freezeConfig, type AppConfig } from '../../src/config/app.ts';

/**
 * An AppConfig for in-process benchmarks: one provider, no schedulers (check interval, resync and
 * GC off), silent logs, long locks; `overrides` set what a benchmark measures.
 */
export function benchConfig(redisUrl: string, prefix: string, dataDir: string, overrides: Partial<AppConfig> = {}): AppConfig {
  return freezeConfig({
    providers: [{ name: 'local', type: 'local' }],
    checks: { intervalMs: 0, timeoutMs: 15_000 },
    redis: { url: redisUrl, prefix },
    api: { host: '127.0.0.1', port: 0, tokens: [], maxBodyBytes: 1024 * 1024, allowedHosts: [] },
    metricsPort: undefined,
    echoUrl: undefined,
    recheckMs: 200,
    resyncMs: 0,
    readiness: { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 300_000, intervalMs: 5000, timeoutMs: 2000 },
    gcIntervalMs: 0,
    gcGraceMs: 600_000,
    gcDeletesPerSecond: 5,
    worker: { queues: ['checks'], concurrency: 10, lockDurationMs: 30_000, stalledIntervalMs: 30_000 },
    dataDir,
    logLevel: 'silent',
    shutdownGraceMs: 2000,
    leaseMs: 15_000,
    backoffMs: 1000,
    retention: { completed: 1000, failed: 1000 },
    events: { maxCount: 10_000, maxAgeMs: 86_400_000 },
    ...overrides,
  } satisfies AppConfig);
}
