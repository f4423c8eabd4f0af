import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { truncateMessage } from '../../health/message.ts';
import type { Logger } from '../../logging.ts';
import { API_GROUP, API_VERSION } from '../../crds/resources.ts';
import { ResourceClient, type CustomObject } from './resource-client.ts';
import { WatchHttpError, watchStream, type WatchStreamOptions } from './watch-stream.ts';

export interface ResourceWatchOptions extends WatchStreamOptions {
  /** First delay after a failure; doubled per failure in a row up to `maxBackoffMs`, with jitter. */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  /** How long the server keeps one watch request open before it ends it (and this resumes); default 5 minutes. */
  timeoutSeconds?: number;
}

/**
 * What a watch follows and how it tells changes apart: `snapshot` keeps what of an object matters,
 * and `changed` gets the snapshot from before and after each event (undefined before: a new object;
 * undefined after: the object is gone).
 */
export interface WatchedResource<O extends CustomObject, S> {
  plural: string;
  snapshot(obj: O): S;
  changed(name: string, before: S | undefined, after: S | undefined): void;
}

type WatchEnd = { kind: 'closed'; events: number; lastedMs: number } | { kind: 'gone' } | { kind: 'failed'; error: unknown };

/** The watch stream says the resourceVersion it resumed from is too old (410 Gone / Expired). */
function isGone(value: unknown): boolean {
  const v = value as { code?: unknown; statusCode?: unknown; reason?: unknown } | null;
  if (v instanceof Error && !(v instanceof WatchHttpError)) return false;
  return v?.code === 410 || v?.statusCode === 410 || v?.reason === 'Expired' || v?.reason === 'Gone';
}

/**
 * Follows the objects of one resource of our API group in one namespace and hands each change to the
 * resource's `changed`, with what it looked like before.
 *
 * It lists, then watches from the list's resourceVersion with bookmarks on, and resumes each new
 * watch from the last resourceVersion it saw (an event's or a bookmark's). A 410 Gone (the version
 * was compacted away) lists again: objects that changed or went missing meanwhile are reported then.
 * Failures wait a bounded exponential backoff with jitter; `signal` ends it all.
 */
export class ResourceWatch<O extends CustomObject, S> {
  readonly #kc: KubeConfig;
  readonly #resource: WatchedResource<O, S>;
  readonly #client: ResourceClient<unknown, unknown>;
  readonly #path: string;
  readonly #logger: Logger;
  readonly #baseMs: number;
  readonly #maxMs: number;
  readonly #timeoutSeconds: number;
  readonly #stream: WatchStreamOptions;
  readonly #seen = new Map<string, S>();

  constructor(kc: KubeConfig, namespace: string, resource: WatchedResource<O, S>, logger: Logger, options: ResourceWatchOptions = {}) {
    this.#kc = kc;
    this.#resource = resource;
    this.#client = new ResourceClient(kc, { plural: resource.plural, namespace });
    this.#path = `/apis/${API_GROUP}/${API_VERSION}/namespaces/${encodeURIComponent(namespace)}/${resource.plural}`;
    this.#logger = logger;
    this.#baseMs = options.baseBackoffMs ?? 500;
    this.#maxMs = options.maxBackoffMs ?? 30_000;
    this.#timeoutSeconds = options.timeoutSeconds ?? 300;
    this.#stream = {
      ...(options.maxLineBytes === undefined ? {} : { maxLineBytes: options.maxLineBytes }),
      ...(options.silentMs === undefined ? {} : { silentMs: options.silentMs }),
    };
  }

  /** Runs until `signal` ends; never rejects for a failed list or watch (it backs off and tries again). */
  async run(signal: AbortSignal): Promise<void> {
    const plural = this.#resource.plural;
    let resourceVersion: string | undefined;
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (resourceVersion === undefined) resourceVersion = await this.#relist(signal);
        const end = await this.#watchOnce(resourceVersion, signal, (rv) => {
          resourceVersion = rv;
          failures = 0;
        });
        if (end.kind === 'gone') {
          this.#logger.info({ resourceVersion, plural }, `${plural} watch: resourceVersion expired (410 Gone); listing again`);
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
        this.#logger.warn({ err: (err as Error).message, plural, failures, retryInMs: delay }, `${plural} watch failed; trying again`);
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

  /** Lists every object, reports the ones that are new, changed or gone since last seen; returns the list's resourceVersion. */
  async #relist(signal: AbortSignal): Promise<string> {
    const { items, resourceVersion } = await this.#client.list(signal);
    const present = new Set<string>();
    for (const obj of items as O[]) {
      present.add(obj.metadata.name);
      this.#observe(obj);
    }
    for (const [name, before] of [...this.#seen]) {
      if (present.has(name)) continue;
      this.#seen.delete(name);
      this.#resource.changed(name, before, undefined);
    }
    return resourceVersion;
  }

  #observe(obj: O): void {
    const name = obj.metadata.name;
    const after = this.#resource.snapshot(obj);
    const before = this.#seen.get(name);
    this.#seen.set(name, after);
    this.#resource.changed(name, before, after);
  }

  /** A deleted object, as last seen (or, never seen before, as the event shows it). */
  #deleted(obj: O): void {
    const name = obj.metadata.name;
    const before = this.#seen.get(name) ?? this.#resource.snapshot(obj);
    this.#seen.delete(name);
    this.#resource.changed(name, before, undefined);
  }

  /** One watch request, until the server closes it, it fails, or `signal` ends. */
  async #watchOnce(resourceVersion: string, signal: AbortSignal, advanced: (rv: string) => void): Promise<WatchEnd> {
    let gone = false;
    let failed: Error | undefined;
    let events = 0;
    const started = Date.now();
    const own = new AbortController();
    const onEvent = (type: string, value: unknown): void => {
      events++;
      const obj = value as O;
      if (type === 'ERROR') {
        gone = isGone(obj);
        if (!gone) failed = new Error(`watch error: ${truncateMessage((obj as { message?: string } | null)?.message ?? 'unknown')}`);
        own.abort();
        return;
      }
      const rv = obj.metadata?.resourceVersion;
      if (rv) advanced(rv);
      if (type === 'BOOKMARK') return;
      if (type === 'DELETED') this.#deleted(obj);
      else if (type === 'ADDED' || type === 'MODIFIED') this.#observe(obj);
    };
    const query = { resourceVersion, allowWatchBookmarks: true, timeoutSeconds: this.#timeoutSeconds };
    try {
      await watchStream(this.#kc, this.#path, query, onEvent, AbortSignal.any([signal, own.signal]), this.#stream);
    } catch (err) {
      return isGone(err) ? { kind: 'gone' } : { kind: 'failed', error: err };
    }
    if (gone) return { kind: 'gone' };
    if (failed) return { kind: 'failed', error: failed };
    return { kind: 'closed', events, lastedMs: Date.now() - started };
  }
}
