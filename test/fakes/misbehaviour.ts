/**
 * Misbehaviour switches shared by the fake HTTP servers (kube-apiserver, Compute), for the hostile-peer
 * suite (test/peers): unlike a one-shot fault, a switch stays on until it is set again. Each models a
 * broken or hostile server seen in the field:
 * - `repeatPageToken`: every list page names this same token as its next page (a server stuck on a page);
 * - `oversizeBodyBytes`: every GET is answered 200 with a chunked JSON body of about this many bytes;
 * - `watchLineBytes` (kube): a watch sends headers, then one line of this many bytes that never ends;
 * - `silentWatch` (kube): a watch sends headers, then nothing, ever;
 * - `listShape`: every list answer is malformed — `no-items` drops its `items`, `garbage` replaces them
 *   with values that are not objects of the kind (a number, a string, null, an empty object);
 * - `quoteRequest`: a write (POST/PUT/PATCH) whose path contains `path` is refused with `status` and
 *   `reason`, the error message quoting the request as a chatty server does: its Authorization header
 *   and its body (an insert's metadata with the user-data, a Secret's `data`).
 */
import type { ServerResponse } from 'node:http';

export interface Misbehaviour {
  repeatPageToken?: string;
  oversizeBodyBytes?: number;
  watchLineBytes?: number;
  silentWatch?: boolean;
  listShape?: 'no-items' | 'garbage';
  quoteRequest?: { path: string; status: number; reason: string };
}

/** The refusal `quoteRequest` makes of `entry`, or undefined when the switch does not apply to it. */
export function quotedRefusal(
  m: Misbehaviour,
  entry: { method: string; path: string; body: string; authorization?: string | undefined },
): { status: number; reason: string; message: string } | undefined {
  const q = m.quoteRequest;
  if (!q || entry.method === 'GET' || entry.method === 'DELETE' || !entry.path.includes(q.path)) return undefined;
  return { status: q.status, reason: q.reason, message: `invalid request (Authorization: ${entry.authorization ?? 'none'}): ${entry.body}` };
}

const CHUNK = Buffer.alloc(1024 * 1024, 0x61);

/** Writes `bytes` of padding in 1 MiB chunks, honouring backpressure; stops when the client goes. */
async function pad(res: ServerResponse, bytes: number): Promise<void> {
  for (let sent = 0; sent < bytes && !res.destroyed; sent += CHUNK.length) {
    const ok = res.write(CHUNK.subarray(0, Math.min(CHUNK.length, bytes - sent)));
    if (!ok) await new Promise<void>((resolve) => res.once('drain', resolve).once('close', resolve));
  }
}

/**
 * Serves the request the hostile way when a switch applies to it (true: answered or left hanging);
 * false when the fake should answer normally. `entry.outcome` becomes `streaming`.
 */
export function misbehave(m: Misbehaviour, entry: { method: string; query: Record<string, string>; outcome: string }, res: ServerResponse): boolean {
  const watch = entry.query.watch === 'true' || entry.query.watch === '1';
  if (watch && (m.watchLineBytes !== undefined || m.silentWatch)) {
    entry.outcome = 'streaming';
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.flushHeaders();
    if (m.watchLineBytes !== undefined) {
      res.write('{"type":"ADDED","object":{"metadata":{"name":"');
      void pad(res, m.watchLineBytes);
    }
    return true;
  }
  if (entry.method === 'GET' && m.oversizeBodyBytes !== undefined) {
    entry.outcome = 'streaming';
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.write('{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[],"padding":"');
    void pad(res, m.oversizeBodyBytes).then(() => res.end('"}'));
    return true;
  }
  return false;
}

/** A list answer misshapen as `listShape` says (unchanged when the switch is off or the body is no list). */
function misshapen(m: Misbehaviour, body: unknown): unknown {
  if (m.listShape === undefined || typeof body !== 'object' || body === null || !('kind' in body) || !String(body.kind).endsWith('List')) return body;
  const { items: _items, ...rest } = body as { items?: unknown };
  return m.listShape === 'no-items' ? rest : { ...rest, items: [7, 'garbage', null, {}] };
}

/** A list answer as the switches make it: misshapen (`listShape`), its next-page token replaced by the stuck one. */
export function withStuckPageToken(m: Misbehaviour, answer: unknown, field: 'continue' | 'nextPageToken'): unknown {
  const body = misshapen(m, answer);
  if (m.repeatPageToken === undefined || typeof body !== 'object' || body === null) return body;
  if (field === 'nextPageToken') return 'kind' in body && String(body.kind).endsWith('List') ? { ...body, nextPageToken: m.repeatPageToken } : body;
  const list = body as { items?: unknown; metadata?: object };
  if (!Array.isArray(list.items)) return body;
  return { ...list, metadata: { ...list.metadata, continue: m.repeatPageToken } };
}
