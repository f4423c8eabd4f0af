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
