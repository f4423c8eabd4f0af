/**
 * Watch streams of the fake apiserver: HTTP 200 with headers flushed at once, then NDJSON events
 * `{"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": {…}}`.
 * - No resourceVersion (or "0"): synthetic ADDED events for the current state, then live changes.
 * - A resourceVersion: replay from the bounded event log; older than the log → an ERROR event carrying a
 *   410 Expired Status ("too old resource version: X (Y)"), then the stream ends.
 * - Selectors apply; an object that stops (starts) matching is sent as DELETED (ADDED).
 * - `allowWatchBookmarks` → BOOKMARK events every `bookmarkIntervalMs` (0: none); `timeoutSeconds` ends it.
 */
import type { ServerResponse } from 'node:http';
import { podFilter } from './lists.ts';
import type { FakePod, PodStore } from './pod-store.ts';
import { badRequest, status } from './status.ts';

export interface WatchParams {
  namespace: string | undefined;
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion?: string;
  allowWatchBookmarks: boolean;
  timeoutSeconds?: string;
  bookmarkIntervalMs: number;
}

/** What a watch streams from: the current objects, a bounded event log and live changes. */
export interface WatchSource<T extends { metadata: { resourceVersion: string } }> {
  current(): T[];
  events(): Iterable<{ type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T; prev?: T; rv: number }>;
  oldestWatchableRv(): number;
  resourceVersion(): string;
  subscribe(deliver: (ev: { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T; prev?: T }) => void): () => void;
  /** `kind` and `apiVersion` of BOOKMARK objects. */
  bookmark: { kind: string; apiVersion: string };
  /** Renders an event's object (a Table row for `as=Table` watches); `first` is true for the stream's first event. */
  render?(object: T, first: boolean): unknown;
}

/** Pods' watch: validates the request (throwing a Status before any header is written), then streams until closed. */
export function serveWatch(store: PodStore, res: ServerResponse, q: WatchParams, onStart: () => void): void {
  const { match } = podFilter(q.labelSelector, q.fieldSelector);
  const source: WatchSource<FakePod> = {
    current: () => store.list(q.namespace),
    events: () => store.events,
    oldestWatchableRv: () => store.oldestWatchableRv(),
    resourceVersion: () => store.resourceVersion(),
    subscribe: (deliver) => {
      store.on('change', deliver);
      return () => store.off('change', deliver);
    },
    bookmark: { kind: 'Pod', apiVersion: 'v1' },
  };
  streamWatch(source, (p) => (q.namespace === undefined || p.metadata.namespace === q.namespace) && match(p), res, q, onStart);
}

/** Streams `source`'s events that `inScope` keeps, as the real watch does (see the header). */
export function streamWatch<T extends { metadata: { resourceVersion: string } }>(
  source: WatchSource<T>,
  inScope: (o: T) => boolean,
  res: ServerResponse,
  q: WatchParams,
  onStart: () => void,
): void {
  let startRv: number | undefined;
  if (q.resourceVersion && q.resourceVersion !== '0') {
    if (!/^\d+$/.test(q.resourceVersion)) throw badRequest(`resourceVersion: Invalid value: "${q.resourceVersion}"`);
    startRv = Number(q.resourceVersion);
  }

  onStart();
  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  res.flushHeaders();
  let first = true;
  const write = (type: string, object: unknown): void => {
    if (!res.destroyed && !res.writableEnded) res.write(`${JSON.stringify({ type, object })}\n`);
  };
  const writeObject = (type: string, object: T): void => {
    write(type, source.render ? source.render(object, first) : object);
    first = false;
  };
  const deliver = (ev: { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T; prev?: T }): void => {
    const now = inScope(ev.object);
    if (ev.type !== 'MODIFIED') {
      if (now) writeObject(ev.type, ev.object);
      return;
    }
    const before = ev.prev ? inScope(ev.prev) : false;
    if (now) writeObject(before ? 'MODIFIED' : 'ADDED', ev.object);
    else if (before) writeObject('DELETED', ev.object);
  };

  if (startRv === undefined) {
    for (const p of source.current()) if (inScope(p)) writeObject('ADDED', p);
  } else if (startRv < source.oldestWatchableRv()) {
    write('ERROR', status(410, 'Expired', `too old resource version: ${startRv} (${source.oldestWatchableRv()})`));
    res.end();
    return;
  } else {
    for (const ev of source.events()) if (ev.rv > startRv) deliver(ev);
  }

  const unsubscribe = source.subscribe(deliver);
  const timers: NodeJS.Timeout[] = [];
  if (q.allowWatchBookmarks && q.bookmarkIntervalMs > 0) {
    timers.push(setInterval(() => write('BOOKMARK', { ...source.bookmark, metadata: { resourceVersion: source.resourceVersion() } }), q.bookmarkIntervalMs));
  }
  const timeout = Number(q.timeoutSeconds);
  if (q.timeoutSeconds !== undefined && Number.isFinite(timeout) && timeout > 0) {
    timers.push(setTimeout(() => res.end(), timeout * 1000));
  }
  // Cleanup is tied to the response's close (the request's fires as soon as its body has been read).
  res.once('close', () => {
    unsubscribe();
    for (const t of timers) clearTimeout(t);
  });
}
