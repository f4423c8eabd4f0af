/**
 * One Kubernetes watch request with bounds the peer cannot talk its way past. client-node's `Watch`
 * reads lines with readline, which buffers a line without limit (a 512 MiB line grew the process to
 * 2 GB and then threw a RangeError nobody could catch), sets no read timeout (a server that sends
 * headers and then nothing holds the watch for ever) and swallows what the callback throws. Here:
 * - a line longer than `maxLineBytes` ends the request with WatchLineTooLongError, before more is buffered;
 * - nothing received for `silentMs` (bookmarks arrive about once a minute) ends it with WatchSilentError;
 * - a line that is not JSON, or an `onEvent` that throws, ends it with that error;
 * so the caller's loop restarts the watch; nothing escapes as an uncaught exception.
 * Credentials, CA and client certificates come from the KubeConfig (`applyToHTTPSOptions`), as the
 * client-node request would use them.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { EgressError, toError } from '../../errors.ts';
import { truncateMessage } from '../../health/message.ts';

/** A watch line may cost this many bytes; an object of our CRDs is a few KiB. */
export const DEFAULT_MAX_WATCH_LINE_BYTES = 16 * 1024 * 1024;
/** A watch silent this long is restarted (the API server sends a bookmark about every minute). */
export const DEFAULT_WATCH_SILENT_MS = 150_000;
/** Of a failed watch request's body, this much is read for its Status message. */
const ERROR_BODY_BYTES = 64 * 1024;

export interface WatchStreamOptions {
  maxLineBytes?: number;
  silentMs?: number;
}

/** A watch line passed the bound. */
export class WatchLineTooLongError extends EgressError {
  constructor(limit: number) {
    super('ERR_KUBE_WATCH_LINE_TOO_LONG', `the API server sent a watch line longer than ${limit} bytes; the watch was ended`, { retryable: true });
  }
}

/** The watch sent nothing for `silentMs`. */
export class WatchSilentError extends EgressError {
  constructor(silentMs: number) {
    super('ERR_KUBE_WATCH_SILENT', `the watch sent nothing (not even a bookmark) for ${silentMs} ms; it was ended`, { retryable: true });
  }
}

/** The watch request was answered with an HTTP error. */
export class WatchHttpError extends EgressError {
  readonly statusCode: number;
  readonly reason: string | undefined;
  constructor(statusCode: number, reason: string | undefined, message: string) {
    super('ERR_KUBE_WATCH_HTTP', `watch answered HTTP ${statusCode}${message ? `: ${truncateMessage(message)}` : ''}`, { retryable: true });
    this.statusCode = statusCode;
    this.reason = reason;
  }
}

export type WatchCallback = (type: string, object: unknown) => void;

/**
 * Runs one watch request until the server ends it (resolves), it fails (rejects), or `signal` ends
 * (resolves). `onEvent` hears each event line in order.
 */
export async function watchStream(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | number | boolean | undefined>,
  onEvent: WatchCallback,
  signal: AbortSignal,
  options: WatchStreamOptions = {},
): Promise<void> {
  const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_WATCH_LINE_BYTES;
  const silentMs = options.silentMs ?? DEFAULT_WATCH_SILENT_MS;
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new EgressError('ERR_KUBE_CONFIG', 'the kubeconfig has no current cluster');
  const url = new URL(cluster.server + path);
  url.searchParams.set('watch', 'true');
  for (const [key, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(key, String(value));
  const requestOptions: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(requestOptions);
  signal.throwIfAborted();
  const transport = url.protocol === 'https:' ? https : http;

  return new Promise<void>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (err?: unknown): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      req.destroy();
      if (err === undefined || signal.aborted) resolve();
      else reject(toError(err));
    };
    const onAbort = (): void => finish();
    const quiet = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(new WatchSilentError(silentMs)), silentMs);
      timer.unref();
    };
    const req = transport.request(url, { ...requestOptions, method: 'GET', headers: { ...requestOptions.headers, Accept: 'application/json' } });
    req.on('error', (err) => finish(err));
    req.on('response', (res) => {
      res.on('error', (err) => finish(err));
      if (res.statusCode !== 200) {
        readErrorBody(res, (text) => finish(httpError(res.statusCode ?? 0, text)));
        return;
      }
      quiet();
      const lines = new LineSplitter(maxLineBytes);
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        quiet();
        try {
          for (const line of lines.push(chunk)) {
            if (settled) return;
            const event = JSON.parse(line) as { type?: unknown; object?: unknown };
            onEvent(typeof event.type === 'string' ? event.type : '', event.object);
          }
        } catch (err) {
          finish(err);
        }
      });
      res.on('end', () => finish());
      res.on('close', () => finish());
    });
    signal.addEventListener('abort', onAbort, { once: true });
    req.end();
  });
}

/** Splits NDJSON chunks into lines, holding at most `maxBytes` of an unfinished one. */
class LineSplitter {
  #parts: Buffer[] = [];
  #pending = 0;
  constructor(readonly maxBytes: number) {}

  push(chunk: Buffer): string[] {
    const out: string[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      this.#take(chunk.subarray(start, nl));
      const line = Buffer.concat(this.#parts).toString('utf8').trim();
      this.#parts = [];
      this.#pending = 0;
      if (line !== '') out.push(line);
      start = nl + 1;
    }
    if (start < chunk.length) this.#take(chunk.subarray(start));
    return out;
  }

  #take(part: Buffer): void {
    this.#pending += part.length;
    if (this.#pending > this.maxBytes) throw new WatchLineTooLongError(this.maxBytes);
    this.#parts.push(part);
  }
}

function readErrorBody(res: http.IncomingMessage, done: (text: string) => void): void {
  const parts: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    if (size >= ERROR_BODY_BYTES) return;
    parts.push(chunk.subarray(0, ERROR_BODY_BYTES - size));
    size += chunk.length;
    if (size >= ERROR_BODY_BYTES) done(Buffer.concat(parts).toString('utf8'));
  });
  res.on('end', () => done(Buffer.concat(parts).toString('utf8')));
}

function httpError(statusCode: number, body: string): WatchHttpError {
  try {
    const status = JSON.parse(body) as { reason?: unknown; message?: unknown };
    return new WatchHttpError(
      statusCode,
      typeof status.reason === 'string' ? status.reason : undefined,
      typeof status.message === 'string' ? status.message : '',
    );
  } catch {
    return new WatchHttpError(statusCode, undefined, '');
  }
}
