/** Request plumbing shared by the fake HTTP servers (kube-apiserver, Compute). */
import type { ServerResponse } from 'node:http';

/** Marks a logged request `client-aborted` (and calls `onAbort`) when the client goes away before the response was sent. */
export function watchClientAbort(entry: { outcome: string }, res: ServerResponse, onAbort: () => void): void {
  res.on('close', () => {
    if (entry.outcome === 'pending' && !res.writableFinished) {
      entry.outcome = 'client-aborted';
      onAbort();
    }
  });
}

/** Waits `ms` (an injected latency), or less when the client closes first; the timer is tracked so `close()` can clear it. */
export function delayUnlessClosed(ms: number, res: ServerResponse, timers: Set<NodeJS.Timeout>): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = setTimeout(() => {
      timers.delete(t);
      resolve();
    }, ms);
    timers.add(t);
    res.once('close', () => {
      clearTimeout(t);
      timers.delete(t);
      resolve();
    });
  });
}

/** Which requests an injected fault applies to: any, or those of this method and path. */
export interface FaultMatch {
  method?: string;
  path?: string | RegExp;
}

/** Removes and returns the first fault whose `match` fits the request (one without `match` fits any). */
export function takeFault<F extends { match?: FaultMatch }>(faults: F[], entry: { method: string; path: string }): F | undefined {
  const i = faults.findIndex((f) => {
    const m = f.match;
    if (!m) return true;
    if (m.method && m.method.toUpperCase() !== entry.method) return false;
    if (typeof m.path === 'string' && m.path !== entry.path) return false;
    if (m.path instanceof RegExp && !m.path.test(entry.path)) return false;
    return true;
  });
  return i >= 0 ? faults.splice(i, 1)[0] : undefined;
}

/** Answers `body` as JSON and records the answer on the logged request (nothing when the client has gone). */
export function sendJson(
  res: ServerResponse,
  entry: { status?: number; outcome: string; responseBody?: string },
  code: number,
  body: unknown,
  contentType = 'application/json',
): void {
  if (res.destroyed) return;
  entry.status = code;
  entry.outcome = 'served';
  const text = JSON.stringify(body);
  entry.responseBody = text;
  res.writeHead(code, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
