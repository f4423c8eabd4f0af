/**
 * Write streams (STORAGE_VOL_UPLOAD): CALL, REPLY OK, then STREAM/CONTINUE data packets of at most
 * STREAM_CHUNK_MAX bytes with no per-packet acknowledgement (flow control is the transport's
 * backpressure), then an empty STREAM/OK that the daemon confirms with STREAM/OK or STREAM/ERROR.
 * A STREAM/ERROR may arrive at any time: sending stops and the call rejects with it. An abort
 * sends STREAM/ERROR with an empty payload and rejects at once.
 */
import { MessageStatus, STREAM_CHUNK_MAX } from './constants.ts';
import { LibvirtAbortError, LibvirtProtocolError } from './errors.ts';
import type { RpcCore } from './rpc.ts';
import type { CallOptions, StreamHandler } from './rpc-types.ts';
import type { UploadResult, UploadSource } from './types.ts';

interface Deferred {
  promise: Promise<never>;
  reject(err: Error): void;
}

function failureSlot(): Deferred {
  let reject!: (err: Error) => void;
  const promise = new Promise<never>((_, rej) => (reject = rej));
  promise.catch(() => undefined);
  return { promise, reject };
}

function iterate(source: UploadSource): AsyncIterator<Uint8Array> | Iterator<Uint8Array> {
  if (Symbol.asyncIterator in source) return source[Symbol.asyncIterator]();
  return source[Symbol.iterator]();
}

export async function runUpload(
  core: RpcCore,
  proc: number,
  name: string,
  args: Buffer,
  source: UploadSource,
  signal: AbortSignal,
  opts: CallOptions,
): Promise<UploadResult> {
  let failed: Error | undefined;
  let finishing = false;
  const failure = failureSlot();
  let confirm!: () => void;
  const confirmed = new Promise<void>((resolve) => (confirm = resolve));
  /** Read through a function: the closures below set `failed` behind the compiler's back. */
  const failedNow = (): Error | undefined => failed;
  const setFailed = (err: Error): void => {
    failed ??= err;
    failure.reject(failed);
  };
  const trace = opts.trace ?? {};
  const handler: StreamHandler = {
    name,
    onPacket(status, payload) {
      if (status === MessageStatus.ERROR) {
        core.dropStream(trace.serial ?? 0);
        setFailed(core.decodeError(payload, { proc, name, opts }));
      } else if (status === MessageStatus.OK) {
        core.dropStream(trace.serial ?? 0);
        if (finishing) confirm();
        else setFailed(new LibvirtProtocolError(`${name}: daemon ended the upload stream before the client finished`));
      }
      // CONTINUE on an upload stream carries nothing for us.
    },
    fail: setFailed,
  };

  await core.call(proc, name, args, signal, { ...opts, trace, stream: handler });
  const serial = trace.serial!;

  const onAbort = (): void => {
    if (failed) return;
    core.dropStream(serial);
    void core.sendStream(serial, proc, MessageStatus.ERROR).catch(() => undefined);
    setFailed(new LibvirtAbortError(name, signal.reason, true));
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });

  const it = iterate(source);
  let bytes = 0;
  try {
    for (;;) {
      const early = failedNow();
      if (early) throw early;
      const next = await Promise.race([it.next(), failure.promise]);
      if (next.done) break;
      const chunk = next.value;
      if (!(chunk instanceof Uint8Array)) throw new TypeError(`${name}: upload source must yield Buffers or Uint8Arrays`);
      for (let off = 0; off < chunk.length; off += STREAM_CHUNK_MAX) {
        const piece = chunk.subarray(off, Math.min(off + STREAM_CHUNK_MAX, chunk.length));
        await Promise.race([core.sendStream(serial, proc, MessageStatus.CONTINUE, piece), failure.promise]);
        bytes += piece.length;
      }
    }
    const late = failedNow();
    if (late) throw late;
    finishing = true;
    await Promise.race([core.sendStream(serial, proc, MessageStatus.OK), failure.promise]);
    await Promise.race([confirmed, failure.promise]);
    return { bytes };
  } catch (err) {
    if (!failedNow()) {
      // The source threw: tell the daemon to abandon the stream.
      core.dropStream(serial);
      void core.sendStream(serial, proc, MessageStatus.ERROR).catch(() => undefined);
    }
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
    core.dropStream(serial);
    if (!finishing || failedNow()) void Promise.resolve(it.return?.()).catch(() => undefined);
  }
}
