/**
 * Read streams (STORAGE_VOL_DOWNLOAD): CALL, REPLY OK, then the daemon pushes STREAM/CONTINUE data
 * packets; an empty CONTINUE is EOF, which the client acknowledges with an empty STREAM/OK and the
 * daemon confirms with STREAM/OK (or STREAM/ERROR). Chunks go to `sink` in order; while a promise
 * returned by `sink` is pending, the whole connection stops reading (the only flow control a
 * read stream has), so keep sinks quick or give the download its own connection.
 */
import { MessageStatus } from './constants.ts';
import { LibvirtAbortError } from './errors.ts';
import type { RpcCore } from './rpc.ts';
import type { CallOptions, StreamHandler } from './rpc-types.ts';

/** Receives downloaded bytes in order; a returned promise pauses reading until it settles. */
export type DownloadSink = (chunk: Buffer) => void | Promise<void>;

export interface DownloadResult {
  bytes: number;
}

export async function runDownload(
  core: RpcCore,
  proc: number,
  name: string,
  args: Buffer,
  sink: DownloadSink,
  signal: AbortSignal,
  opts: CallOptions,
): Promise<DownloadResult> {
  const trace = opts.trace ?? {};
  let bytes = 0;
  let settled = false;
  let sinking: Promise<void> = Promise.resolve();
  let pendingSinks = 0;
  let settle!: (err?: Error) => void;
  const done = new Promise<DownloadResult>((resolve, reject) => {
    settle = (err) => {
      if (settled) return;
      settled = true;
      core.dropStream(trace.serial ?? 0);
      if (pendingSinks > 0) core.resumeReading();
      if (err) reject(err);
      else resolve({ bytes });
    };
  });
  done.catch(() => undefined);

  const abandon = (err: Error): void => {
    if (settled) return;
    void core.sendStream(trace.serial ?? 0, proc, MessageStatus.ERROR).catch(() => undefined);
    settle(err);
  };

  const deliver = (chunk: Buffer): void => {
    bytes += chunk.length;
    sinking = sinking.then(async () => {
      if (settled) return;
      const r = sink(chunk);
      if (r instanceof Promise) {
        if (pendingSinks++ === 0) core.pauseReading();
        try {
          await r;
        } finally {
          if (--pendingSinks === 0 && !settled) core.resumeReading();
        }
      }
    });
    sinking.catch((err: unknown) => abandon(err instanceof Error ? err : new Error(String(err))));
  };

  const handler: StreamHandler = {
    name,
    onPacket(status, payload) {
      if (settled) return;
      if (status === MessageStatus.CONTINUE) {
        if (payload.length > 0) deliver(Buffer.from(payload));
        else void core.sendStream(trace.serial ?? 0, proc, MessageStatus.OK).catch(() => undefined); // EOF: finish
      } else if (status === MessageStatus.OK) {
        void sinking.then(
          () => settle(),
          () => undefined,
        );
      } else {
        settle(core.decodeError(payload, { proc, name, opts }));
      }
    },
    fail: (err) => settle(err),
  };

  await core.call(proc, name, args, signal, { ...opts, trace, stream: handler });
  const onAbort = (): void => abandon(new LibvirtAbortError(name, signal.reason, true));
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await done;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
