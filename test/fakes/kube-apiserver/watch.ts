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
import type { FakePod, PodEvent, PodStore } from './pod-store.ts';
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

/** Validates the request (throwing a Status before any header is written), then streams until closed. */
export function serveWatch(store: PodStore, res: ServerResponse, q: WatchParams, onStart: () => void): void {
  const { match } = podFilter(q.labelSelector, q.fieldSelector);
  const inScope = (p: FakePod): boolean => (q.namespace === undefined || p.metadata.namespace === q.namespace) && match(p);
  let startRv: number | undefined;
  if (q.resourceVersion && q.resourceVersion !== '0') {
    if (!/^\d+$/.test(q.resourceVersion)) throw badRequest(`resourceVersion: Invalid value: "${q.resourceVersion}"`);
    startRv = Number(q.resourceVersion);
  }

  onStart();
  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  res.flushHeaders();
  const write = (type: string, object: unknown): void => {
    if (!res.destroyed && !res.writableEnded) res.write(`${JSON.stringify({ type, object })}\n`);
  };
  const deliver = (ev: PodEvent): void => {
    const now = inScope(ev.object);
    if (ev.type !== 'MODIFIED') {
      if (now) write(ev.type, ev.object);
      return;
    }
    const before = ev.prev ? inScope(ev.prev) : false;
    if (now) write(before ? 'MODIFIED' : 'ADDED', ev.object);
    else if (before) write('DELETED', ev.object);
  };

  if (startRv === undefined) {
    for (const p of store.list(q.namespace)) if (inScope(p)) write('ADDED', p);
  } else if (startRv < store.oldestWatchableRv()) {
    write('ERROR', status(410, 'Expired', `too old resource version: ${startRv} (${store.oldestWatchableRv()})`));
    res.end();
    return;
  } else {
    for (const ev of store.events) if (ev.rv > startRv) deliver(ev);
  }

  store.on('change', deliver);
  const timers: NodeJS.Timeout[] = [];
  if (q.allowWatchBookmarks && q.bookmarkIntervalMs > 0) {
    timers.push(
      setInterval(() => write('BOOKMARK', { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: store.resourceVersion() } }), q.bookmarkIntervalMs),
    );
  }
  const timeout = Number(q.timeoutSeconds);
  if (q.timeoutSeconds !== undefined && Number.isFinite(timeout) && timeout > 0) {
    timers.push(setTimeout(() => res.end(), timeout * 1000));
  }
  // Cleanup is tied to the response's close (the request's fires as soon as its body has been read).
  res.once('close', () => {
    store.off('change', deliver);
    for (const t of timers) clearTimeout(t);
  });
}
