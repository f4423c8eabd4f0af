/*
 * Instance lives from the lifecycle's events: a decorator of an event sink that, besides passing
 * every event on, records each InstanceCreated as a life's start and each InstanceDeleted as its
 * end in the usage store. The event write comes first and is never slowed or failed by the store:
 * its writes run beside it, bounded, and a failure is logged and counted (a life then stays open, or
 * unstarted, until a later event of the same instance; see src/usage/instance-lives.ts).
 */
import type { Logger } from '../logging.ts';
import { POOL_LABEL } from '../model/pool-resource.ts';
import type { ProxyReader } from '../store/proxy-store.ts';
import type { InstanceLifeRecorder } from '../usage/usage-store.ts';
import type { EgressEvent, EventSink, NewEvent } from './event-sink.ts';

/** Store writes in flight beyond which further lives are dropped (and counted) rather than queued. */
const MAX_IN_FLIGHT = 500;

export interface LifeEventDeps {
  lives: InstanceLifeRecorder;
  /** Where the proxy's pool label is read (InstanceCreated). */
  proxies: Pick<ProxyReader, 'get'>;
  /** Machine type and default location by provider name (src/usage/machine-types.ts' `instanceKinds`). */
  kinds: ReadonlyMap<string, { machineType: string; location: string }>;
  logger: Logger;
  /** Counts a life not recorded (`what`: `start` or `end`; `reason`: `error` or `overload`). */
  onFailure?: (what: 'start' | 'end', reason: 'error' | 'overload') => void;
  now?: () => number;
}

export interface LifeRecordingSink extends EventSink {
  /** Resolves once every store write started so far has settled (tests and shutdown). */
  settled(): Promise<void>;
}

function text(details: EgressEvent['details'], key: string): string | undefined {
  const v = details?.[key];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** `inner` with every instance's life recorded in `deps.lives` as its events pass. */
export function recordingLives(inner: EventSink, deps: LifeEventDeps): LifeRecordingSink {
  const inFlight = new Set<Promise<void>>();
  /** The last write of each instance: an instance's writes run one after another, in the order of its events. */
  const tails = new Map<string, Promise<void>>();
  const now = deps.now ?? Date.now;
  const run = (what: 'start' | 'end', key: string, write: () => Promise<void>, log: Record<string, unknown>): void => {
    if (inFlight.size >= MAX_IN_FLIGHT) {
      deps.onFailure?.(what, 'overload');
      deps.logger.warn(log, `instance ${what} not recorded in usage: ${MAX_IN_FLIGHT} writes already waiting`);
      return;
    }
    const p = (tails.get(key) ?? Promise.resolve()).then(write).catch((err: unknown) => {
      deps.onFailure?.(what, 'error');
      deps.logger.warn({ ...log, err: (err as Error).message }, `instance ${what} not recorded in usage`);
    });
    inFlight.add(p);
    tails.set(key, p);
    void p.finally(() => {
      inFlight.delete(p);
      if (tails.get(key) === p) tails.delete(key);
    });
  };
  const observe = (event: NewEvent): void => {
    if (event.object.kind !== 'Proxy') return;
    const instance = text(event.details, 'instance');
    const provider = event.provider ?? text(event.details, 'provider');
    if (instance === undefined || provider === undefined) return;
    const at = new Date(now()).toISOString();
    const proxy = event.object.name;
    const key = `${provider}/${instance}`;
    if (event.reason === 'InstanceCreated') {
      const kind = deps.kinds.get(provider);
      run(
        'start',
        key,
        async () => {
          const pool = (await deps.proxies.get(proxy))?.labels[POOL_LABEL];
          await deps.lives.instanceStarted({
            instance,
            proxy,
            ...(pool ? { pool } : {}),
            provider,
            location: text(event.details, 'location') ?? kind?.location ?? provider,
            machineType: kind?.machineType ?? 'unknown',
            startedAt: at,
          });
        },
        { proxy, instance, provider },
      );
    } else if (event.reason === 'InstanceDeleted') {
      run('end', key, () => deps.lives.instanceEnded(provider, instance, at), { proxy, instance, provider });
    }
  };
  return {
    record(event) {
      inner.record(event);
      try {
        observe(event);
      } catch (err) {
        deps.logger.warn({ err: (err as Error).message }, 'instance life not recorded in usage');
      }
    },
    async settled() {
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
  };
}
