/**
 * The lifecycle half of a libvirt connection: construction over a Duplex, close/destroy, and the
 * single observed invoke path (debug log line and histogram sample for every procedure).
 * Typed procedure methods live in connection.ts.
 */
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../logging.ts';
import { ConnectionClosedError, LibvirtProtocolError } from './errors.ts';
import { DEFAULT_KEEPALIVE, type KeepaliveOptions } from './keepalive.ts';
import { outcomeOf, type LibvirtMetrics } from './metrics.ts';
import { PROCEDURES, type ArgsOf, type ProcedureDef, type ProcedureKey, type ResultOf } from './procedures.ts';
import { RpcCore } from './rpc.ts';
import type { RpcStats } from './rpc-types.ts';
import { decodeXdr, encodeXdr } from './xdr.ts';
import { withSpan } from '../../telemetry/spans.ts';

export interface LibvirtConnectionOptions {
  logger: Logger;
  metrics?: LibvirtMetrics;
  /** Client keepalive; `false` turns it off (PINGs from the peer are still answered). */
  keepalive?: KeepaliveOptions | false;
  /** Calls in flight per connection; more wait in a queue. Default 4 (libvirtd stalls past 5). */
  maxInFlight?: number;
  /** Bound on the CONNECT_CLOSE reply and on the stream's close during `close()`. Default 2000 ms. */
  closeTimeoutMs?: number;
  /** Bytes waiting to be written (queued here and buffered by the stream) past which a peer that stopped reading is dropped. Default DEFAULT_MAX_QUEUED_BYTES (34 MiB). */
  maxQueuedBytes?: number;
}

export const DEFAULT_MAX_IN_FLIGHT = 4;

export class LibvirtConnectionBase {
  protected readonly core: RpcCore;
  protected readonly logger: Logger;
  private readonly metrics: LibvirtMetrics | undefined;
  private readonly closeTimeoutMs: number;
  private closing: Promise<void> | undefined;
  /** False until AUTH_LIST / AUTH_POLKIT succeeded (39/7 then means "authentication required"). */
  authenticated = false;

  constructor(stream: Duplex, options: LibvirtConnectionOptions) {
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.closeTimeoutMs = options.closeTimeoutMs ?? 2_000;
    const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) throw new RangeError(`maxInFlight must be a positive integer, got ${maxInFlight}`);
    this.core = new RpcCore(stream, {
      logger: this.logger,
      maxInFlight,
      keepalive: options.keepalive === false ? false : { ...DEFAULT_KEEPALIVE, ...options.keepalive },
      ...(options.maxQueuedBytes === undefined ? {} : { maxQueuedBytes: options.maxQueuedBytes }),
    });
  }

  get closed(): boolean {
    return this.core.closed;
  }

  /** Why the connection closed (ConnectionClosedError after `close()`), once it has. */
  get closeReason(): Error | undefined {
    return this.core.closeReason;
  }

  /** Calls in flight (tombstones included), queued calls, open streams, keepalive counters. */
  stats(): RpcStats {
    return this.core.stats();
  }

  /** `listener` hears the close reason once (asynchronously at once if already closed). */
  onClose(listener: (reason: Error) => void): void {
    this.core.onClose(listener);
  }

  /** CONNECT_CLOSE (bounded wait), then ends the stream. Idempotent; never rejects. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.core.closed) return;
      this.core.closingByClient = true;
      this.core.rejectQueued(new ConnectionClosedError());
      try {
        await this.invoke(PROCEDURES.connectClose, undefined, AbortSignal.timeout(this.closeTimeoutMs), true);
      } catch {
        // best effort
      }
      await this.core.shutdown(this.closeTimeoutMs);
    })();
    return this.closing;
  }

  /** Immediate teardown: pending calls fail with ConnectionLostError caused by `err`. */
  destroy(err?: Error): void {
    this.core.fail(err ?? new ConnectionClosedError());
  }

  /** Calls any procedure of the table by key. */
  call<K extends ProcedureKey>(key: K, args: ArgsOf<K>, signal: AbortSignal): Promise<ResultOf<K>> {
    const def = PROCEDURES[key] as unknown as ProcedureDef<ArgsOf<K>, ResultOf<K>>;
    if (def.stream) return Promise.reject(new TypeError(`${def.name} is a stream procedure; use its method`));
    return this.invoke(def, args, signal);
  }

  protected invoke<A, R>(def: ProcedureDef<A, R>, args: A, signal: AbortSignal, priority = false): Promise<R> {
    return this.observe(def, async (trace) => {
      const payload = encodeXdr(args, def.args.write);
      const reply = await this.core.call(def.proc, def.name, payload, signal, { trace, priority, authenticated: this.isAuthed });
      try {
        return decodeXdr(reply, def.ret.read);
      } catch (err) {
        throw new LibvirtProtocolError(`${def.name}: undecodable reply`, { cause: err });
      }
    });
  }

  protected readonly isAuthed = (): boolean => this.authenticated;

  /** The single path every procedure goes through: debug log line and histogram sample. */
  protected async observe<A, R, T>(def: ProcedureDef<A, R>, run: (trace: { serial?: number }) => Promise<T>): Promise<T> {
    const started = performance.now();
    const trace: { serial?: number } = {};
    let outcome = 'ok';
    try {
      // A span per call, beside the histogram sample: the procedure, never its arguments.
      return await withSpan(`libvirt ${def.name}`, { 'rpc.system': 'libvirt', 'rpc.method': def.name }, async (span) => {
        const result = await run(trace);
        if (trace.serial !== undefined) span.setAttribute('egress.libvirt.serial', trace.serial);
        return result;
      });
    } catch (err) {
      outcome = outcomeOf(err);
      throw err;
    } finally {
      const ms = performance.now() - started;
      this.logger.debug({ procedure: def.name, serial: trace.serial, durationMs: Math.round(ms * 1000) / 1000, outcome }, 'libvirt call');
      this.metrics?.observeCall(def.name, outcome, ms / 1000);
    }
  }
}
