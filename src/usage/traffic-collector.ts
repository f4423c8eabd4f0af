/**
 * The traffic collector (docs/usage.md#traffic): the worker's link between the counts the proxies
 * keep (src/providers/local/traffic-stats.ts; remote ones answer theirs: src/proxies/remote-traffic.ts)
 * and the usage store.
 *
 *   const collector = startTrafficCollector({
 *     sources: trafficSources(config.providers, config.dataDir), // src/providers/traffic-sources.ts
 *     resolve: createProxyResolver({ reader: stores.proxies, fleet: fleetOf(prefix) }), // src/proxies/proxy-resolver.ts
 *     sink, // the usage store's
 *     logger,
 *   });
 *   ...
 *   await collector.close(AbortSignal.timeout(5_000));
 *
 * Every `intervalMs` (default 60 s) it reads what each instance's `traffic-stats.json` grew by
 * since its last look (a proxy restarted counts from zero), places each instance (its proxy and
 * pool, through `resolve`; without one, or for an instance the store no longer has, the proxy its
 * intent names and no pool), and hands the sink one TrafficRecord per (hour, provider, proxy,
 * domain), `hour` being the hour of the look (`hourOf(now())`). A sink that rejects (or does not
 * finish within the interval) loses nothing and counts nothing twice: the records stay pending and
 * go again, with what grew meanwhile added, at the next look. The sink should write each call
 * whole or not at all (a Redis MULTI), since a call that fails is sent again in full.
 *
 * `flush(signal)` looks now (one look at a time, in order) and rejects with TrafficSinkError when
 * the sink failed; `close(signal)` stops the interval and makes one last flush bounded by `signal`.
 * It is not wired into any role here: the worker starts it with its sink.
 */
import { EgressError } from '../errors.ts';
import type { Logger } from '../logging.ts';
import type { ProxyResolver, TrafficSource } from './traffic-source.ts';
import { addTraffic, emptyTraffic, hourOf, type TrafficRecord } from './usage-types.ts';

export const TRAFFIC_COLLECT_INTERVAL_MS = 60_000;

/** Where the records go (the usage store); it rejects when they were not kept. */
export type TrafficSink = (records: TrafficRecord[], signal: AbortSignal) => Promise<void>;

export interface TrafficCollectorOptions {
  sources: readonly TrafficSource[];
  sink: TrafficSink;
  /** Each instance's proxy and pool (src/proxies/proxy-resolver.ts). */
  resolve?: ProxyResolver;
  logger: Logger;
  intervalMs?: number;
  now?: () => Date;
}

export interface TrafficCollector {
  /** Reads what grew now and hands every pending record to the sink; rejects with TrafficSinkError when the sink failed (they stay pending). */
  flush(signal: AbortSignal): Promise<void>;
  /** Stops the interval, then one last flush bounded by `signal` (what it could not hand over is logged as lost). */
  close(signal: AbortSignal): Promise<void>;
  /** Records waiting for the sink (after a failure). */
  readonly pending: number;
}

/** The sink did not take the records; they stay pending for the next look (retryable as data). */
export class TrafficSinkError extends EgressError {
  constructor(records: number, cause: unknown) {
    super(
      'ERR_TRAFFIC_SINK',
      `the usage store did not take ${records} traffic record(s): ${(cause as Error).message}; they are sent again at the next collection`,
      {
        cause,
        retryable: true,
      },
    );
  }
}

export function startTrafficCollector(options: TrafficCollectorOptions): TrafficCollector {
  const intervalMs = options.intervalMs ?? TRAFFIC_COLLECT_INTERVAL_MS;
  const now = options.now ?? (() => new Date());
  const pending = new Map<string, TrafficRecord>();
  const closing = new AbortController();

  const look = async (signal: AbortSignal): Promise<void> => {
    const hour = hourOf(now());
    for (const { provider, read } of options.sources) {
      for (const grown of await read()) {
        const placed = await options.resolve?.(grown.instance, signal);
        const proxy = placed?.proxy ?? grown.proxy ?? grown.instance;
        for (const [domain, counts] of grown.domains) {
          const key = JSON.stringify([hour, provider, proxy, domain]);
          const record = pending.get(key) ?? { hour, proxy, provider, domain, counts: emptyTraffic() };
          if (placed?.pool !== undefined) record.pool = placed.pool;
          addTraffic(record.counts, counts);
          pending.set(key, record);
        }
      }
    }
    if (pending.size === 0) return;
    const records = [...pending.values()].map((r) => ({ ...r, counts: { ...r.counts } }));
    try {
      signal.throwIfAborted();
      await options.sink(records, signal);
    } catch (err) {
      throw new TrafficSinkError(records.length, err);
    }
    pending.clear();
    await Promise.all(options.sources.map((s) => (s.commit ? s.commit() : Promise.resolve())));
  };

  let running: Promise<void> = Promise.resolve();
  const flush = (signal: AbortSignal): Promise<void> => {
    const run = running.then(() => look(signal));
    running = run.catch(() => undefined);
    return run;
  };

  const timer = setInterval(() => {
    flush(AbortSignal.any([closing.signal, AbortSignal.timeout(intervalMs)])).catch((err: unknown) =>
      options.logger.warn({ err: (err as Error).message, pending: pending.size }, 'traffic records not stored yet; retried at the next collection'),
    );
  }, intervalMs);
  timer.unref();

  return {
    flush,
    async close(signal) {
      clearInterval(timer);
      const onAbort = (): void => closing.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        await flush(signal);
      } catch (err) {
        options.logger.error({ err: (err as Error).message, records: pending.size }, 'traffic records lost at close: the usage store did not take them');
        throw err;
      } finally {
        signal.removeEventListener('abort', onAbort);
      }
    },
    get pending() {
      return pending.size;
    },
  };
}
