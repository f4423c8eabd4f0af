import { setTimeout as sleep } from 'node:timers/promises';
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../../logging.ts';
import { API_GROUP, API_VERSION } from '../../crds/resources.ts';
import { ResourceClient } from './resource-client.ts';
import type { ProxyObject, ResourceStatus } from './proxy-objects.ts';
import type { ProxySpec } from '../../model/proxy-resource.ts';

export interface ProxyWatchOptions {
  /** First delay after a failure; doubled per failure in a row up to `maxBackoffMs`, with jitter. */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  /** How long the server keeps one watch request open before it ends it (and this resumes); default 5 minutes. */
  timeoutSeconds?: number;
}

/** What a Proxy looked like last time, to tell a change that needs a reconcile from a status write. */
interface Seen {
  generation: number | undefined;
  deleting: boolean;
}

type WatchEnd = { kind: 'closed'; events: number; lastedMs: number } | { kind: 'gone' } | { kind: 'failed'; error: unknown };

/** The watch stream says the resourceVersion it resumed from is too old (410 Gone / Expired). */
function isGone(value: unknown): boolean {
  const v = value as { code?: unknown; statusCode?: unknown; reason?: unknown } | null;
  return v?.code === 410 || v?.statusCode === 410 || v?.reason === 'Expired' || v?.reason === 'Gone';
}

/**
 * Follows the Proxy objects of one namespace and calls `onChange(name)` once per change that needs a
 * reconcile: a Proxy added, its spec changed (its generation moved), its deletion requested
 * (`deletionTimestamp` set), or the Proxy gone. Status writes (reconcile's own) do not count.
 *
 * It lists, then watches from the list's resourceVersion with bookmarks on, and resumes each new
 * watch from the last resourceVersion it saw (an event's or a bookmark's). A 410 Gone (the version
 * was compacted away) lists again: Proxies that changed or went missing meanwhile are reported then.
 * Failures wait a bounded exponential backoff with jitter; `signal` ends it all.
 */
export class ProxyWatch {
  readonly #kc: KubeConfig;
  readonly #client: ResourceClient<ProxySpec, ResourceStatus>;
  readonly #path: string;
  readonly #logger: Logger;
  readonly #baseMs: number;
  readonly #maxMs: number;
  readonly #timeoutSeconds: number;
  readonly #seen = new Map<string, Seen>();

  constructor(kc: KubeConfig, namespace: string, logger: Logger, options: ProxyWatchOptions = {}) {
    this.#kc = kc;
    this.#client = new ResourceClient(kc, { plural: 'proxies', namespace });
    this.#path = `/apis/${API_GROUP}/${API_VERSION}/namespaces/${encodeURIComponent(namespace)}/proxies`;
    this.#logger = logger;
    this.#baseMs = options.baseBackoffMs ?? 500;
    this.#maxMs = options.maxBackoffMs ?? 30_000;
    this.#timeoutSeconds = options.timeoutSeconds ?? 300;
  }

  /** Runs until `signal` ends; never rejects for a failed list or watch (it backs off and tries again). */
  async run(onChange: (name: string) => void, signal: AbortSignal): Promise<void> {
    let resourceVersion: string | undefined;
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (resourceVersion === undefined) resourceVersion = await this.#relist(onChange, signal);
        const end = await this.#watchOnce(resourceVersion, onChange, signal, (rv) => {
          resourceVersion = rv;
          failures = 0;
        });
        if (end.kind === 'gone') {
          this.#logger.info({ resourceVersion }, 'proxy watch: resourceVersion expired (410 Gone); listing again');
          resourceVersion = undefined;
          continue;
        }
        // A server that ends watches at once, with nothing sent, must not make this spin: that counts as a failure.
        if (end.kind === 'closed' && (end.events > 0 || end.lastedMs >= 1000)) continue;
        if (end.kind === 'closed') throw new Error('the API server ended the watch at once, without sending anything');
        throw end.error;
      } catch (err) {
        if (signal.aborted) break;
        failures++;
        const delay = this.#backoff(failures);
        this.#logger.warn({ err: (err as Error).message, failures, retryInMs: delay }, 'proxy watch failed; trying again');
        try {
          await sleep(delay, undefined, { signal });
        } catch {
          break;
        }
      }
    }
  }

  #backoff(failures: number): number {
    const ceiling = Math.min(this.#maxMs, this.#baseMs * 2 ** Math.min(failures - 1, 20));
    return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
  }

  /** Lists every Proxy, reports the ones that are new, changed or gone since last seen; returns the list's resourceVersion. */
  async #relist(onChange: (name: string) => void, signal: AbortSignal): Promise<string> {
    const { items, resourceVersion } = await this.#client.list(signal);
    const present = new Set<string>();
    for (const obj of items) {
      present.add(obj.metadata.name);
      this.#observe(obj, onChange);
    }
    for (const name of [...this.#seen.keys()]) {
      if (present.has(name)) continue;
      this.#seen.delete(name);
      onChange(name);
    }
    return resourceVersion;
  }

  #observe(obj: ProxyObject, onChange: (name: string) => void): void {
    const name = obj.metadata.name;
    const next: Seen = { generation: obj.metadata.generation, deleting: obj.metadata.deletionTimestamp !== undefined };
    const before = this.#seen.get(name);
    this.#seen.set(name, next);
    if (!before || before.generation !== next.generation || (next.deleting && !before.deleting)) onChange(name);
  }

  /** One watch request, until the server closes it, it fails, or `signal` ends. */
  async #watchOnce(resourceVersion: string, onChange: (name: string) => void, signal: AbortSignal, advanced: (rv: string) => void): Promise<WatchEnd> {
    let settle: (end: WatchEnd) => void = () => undefined;
    const ended = new Promise<WatchEnd>((resolve) => {
      settle = resolve;
    });
    let gone = false;
    let events = 0;
    const started = Date.now();
    const controller = await new Watch(this.#kc).watch(
      this.#path,
      { resourceVersion, allowWatchBookmarks: true, timeoutSeconds: this.#timeoutSeconds },
      (type: string, obj: ProxyObject) => {
        events++;
        if (type === 'ERROR') {
          gone = isGone(obj);
          if (!gone) settle({ kind: 'failed', error: new Error(`watch error: ${(obj as { message?: string }).message ?? 'unknown'}`) });
          return;
        }
        const rv = obj.metadata?.resourceVersion;
        if (rv) advanced(rv);
        if (type === 'BOOKMARK') return;
        if (type === 'DELETED') {
          this.#seen.delete(obj.metadata.name);
          onChange(obj.metadata.name);
          return;
        }
        if (type === 'ADDED' || type === 'MODIFIED') this.#observe(obj, onChange);
      },
      (err: unknown) => {
        if (gone || isGone(err)) settle({ kind: 'gone' });
        else if (err) settle({ kind: 'failed', error: err });
        else settle({ kind: 'closed', events, lastedMs: Date.now() - started });
      },
    );
    const stop = (): void => controller.abort();
    if (signal.aborted) stop();
    signal.addEventListener('abort', stop, { once: true });
    try {
      return await ended;
    } finally {
      signal.removeEventListener('abort', stop);
      controller.abort();
    }
  }
}
