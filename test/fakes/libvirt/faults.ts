/**
 * Fault knobs of the fake libvirt daemon. Reply-side knobs are keyed by procedure name (the
 * client's table name, e.g. 'domain_get_state'); one-shot knobs are consumed by the next match.
 */
import type { RemoteError } from '../../../src/kvm/libvirt/errors.ts';
import { remoteError } from '../../../src/kvm/libvirt/codecs.ts';

/** Holds replies of one procedure until released: late, reordered or never-sent replies. */
export class ReplyGate {
  private readonly heldReplies: (() => void)[] = [];
  private readonly waiters: { n: number; resolve: () => void }[] = [];
  open = false;

  get held(): number {
    return this.heldReplies.length;
  }

  hold(deliver: () => void): void {
    if (this.open) {
      deliver();
      return;
    }
    this.heldReplies.push(deliver);
    for (const w of [...this.waiters]) {
      if (this.heldReplies.length >= w.n) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  }

  /** Resolves once at least `n` replies are held. */
  untilHeld(n: number): Promise<void> {
    if (this.heldReplies.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  /** Sends the held replies in arrival order. */
  release(): void {
    for (const d of this.heldReplies.splice(0)) d();
  }

  /** Sends the held replies newest first. */
  releaseReversed(): void {
    for (const d of this.heldReplies.splice(0).reverse()) d();
  }

  /** Stops holding: held replies are sent, later ones go out at once. */
  openGate(): void {
    this.open = true;
    this.release();
  }
}

export class FakeFaults {
  /** Every session reads but never answers anything (not even PINGs): a dead peer. */
  silent = false;
  private readonly delays = new Map<string, number>();
  private readonly gates = new Map<string, ReplyGate>();
  private readonly errors = new Map<string, RemoteError[]>();
  private readonly rewrites = new Map<string, ((payload: Buffer) => Buffer)[]>();
  private readonly rawReplies = new Map<string, ((serial: number) => Buffer)[]>();
  private uploadFailures: number[] = [];

  /** Delays every reply of `procedure` by `ms`. */
  delay(procedure: string, ms: number): void {
    this.delays.set(procedure, ms);
  }

  /** Holds the replies of `procedure` until the returned gate releases them. */
  gate(procedure: string): ReplyGate {
    const g = new ReplyGate();
    this.gates.set(procedure, g);
    return g;
  }

  /** The next call of `procedure` fails with this libvirt error. */
  failNext(procedure: string, code: number, domain: number, message = 'injected fault'): void {
    const list = this.errors.get(procedure) ?? [];
    list.push(remoteError(code, domain, message));
    this.errors.set(procedure, list);
  }

  /** The next reply payload of `procedure` goes through `fn` (e.g. to corrupt an optional flag). */
  rewriteNext(procedure: string, fn: (payload: Buffer) => Buffer): void {
    const list = this.rewrites.get(procedure) ?? [];
    list.push(fn);
    this.rewrites.set(procedure, list);
  }

  /** The next reply to `procedure` is replaced by raw bytes (truncated frame, oversize length). */
  rawReplyNext(procedure: string, fn: (serial: number) => Buffer): void {
    const list = this.rawReplies.get(procedure) ?? [];
    list.push(fn);
    this.rawReplies.set(procedure, list);
  }

  /** The next upload fails with STREAM/ERROR 38/38 once more than `bytes` arrived, then a stray STREAM/OK. */
  failNextUploadAfter(bytes: number): void {
    this.uploadFailures.push(bytes);
  }

  /** Clears every knob. */
  reset(): void {
    this.silent = false;
    this.delays.clear();
    for (const g of this.gates.values()) g.openGate();
    this.gates.clear();
    this.errors.clear();
    this.rewrites.clear();
    this.rawReplies.clear();
    this.uploadFailures = [];
  }

  // ---- used by sessions ----
  takeError(procedure: string): RemoteError | undefined {
    return this.errors.get(procedure)?.shift();
  }

  rewrite(procedure: string, payload: Buffer): Buffer {
    const fn = this.rewrites.get(procedure)?.shift();
    return fn ? fn(payload) : payload;
  }

  takeRawReply(procedure: string, serial: number): Buffer | undefined {
    return this.rawReplies.get(procedure)?.shift()?.(serial);
  }

  takeUploadFailure(): number | undefined {
    return this.uploadFailures.shift();
  }

  schedule(procedure: string, deliver: () => void): void {
    const gate = this.gates.get(procedure);
    if (gate) return gate.hold(deliver);
    const ms = this.delays.get(procedure);
    if (ms === undefined) return deliver();
    setTimeout(deliver, ms).unref();
  }
}
