/** The host pool's rules, with an in-memory connection and a dial the test controls. */
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeadlineError } from '../../src/errors.ts';
import { DialError } from '../../src/kvm/dial.ts';
import { createKvmPoolMetrics, HostPool, KvmAbortedError, PoolClosedError, ProbeBusyError, type PoolConnection } from '../../src/kvm/pool/index.ts';
import { silentLogger } from '../../src/logging.ts';
import { waitFor } from '../fakes/libvirt/harness.ts';

class MemConn implements PoolConnection {
  closed = false;
  closeCalls = 0;
  destroyed: Error | undefined;
  private readonly listeners: ((r: Error) => void)[] = [];
  constructor(readonly id: number) {}
  onClose(l: (r: Error) => void): void {
    this.listeners.push(l);
  }
  close(): Promise<void> {
    this.closeCalls++;
    this.die(new Error('closed'));
    return Promise.resolve();
  }
  destroy(err?: Error): void {
    this.destroyed = err ?? new Error('destroyed');
    this.die(this.destroyed);
  }
  private readonly pendingRpcs = new Set<(e: Error) => void>();
  die(reason: Error): void {
    if (this.closed) return;
    this.closed = true;
    // Like the libvirt client: pending calls fail when the connection goes.
    for (const fail of [...this.pendingRpcs]) fail(reason);
    for (const l of this.listeners.splice(0)) l(reason);
  }
  /** An RPC that settles when the test says so, or rejects when the signal ends or the connection dies. */
  rpc(signal: AbortSignal): { promise: Promise<string>; answer: (v: string) => void } {
    let answer: (v: string) => void = () => undefined;
    const promise = new Promise<string>((resolve, reject) => {
      const fail = (e: Error): void => {
        this.pendingRpcs.delete(fail);
        reject(e);
      };
      answer = (v) => {
        this.pendingRpcs.delete(fail);
        resolve(v);
      };
      if (this.closed) {
        fail(new Error('connection closed'));
        return;
      }
      this.pendingRpcs.add(fail);
      if (signal.aborted) fail(signal.reason as Error);
      signal.addEventListener('abort', () => fail(signal.reason as Error), { once: true });
    });
    return { promise, answer };
  }
}

interface PendingDial {
  signal: AbortSignal;
  resolve: () => void;
  reject: (e: Error) => void;
}

/** A dial the test resolves or fails by hand. */
class Dialer {
  readonly pending: PendingDial[] = [];
  readonly conns: MemConn[] = [];
  dials = 0;
  auto = false;
  private waiters: (() => void)[] = [];
  dial = (_host: { name: string }, signal: AbortSignal): Promise<MemConn> => {
    this.dials++;
    if (this.auto) return Promise.resolve(this.make());
    return new Promise<MemConn>((resolve, reject) => {
      const p: PendingDial = { signal, resolve: () => resolve(this.make()), reject };
      signal.addEventListener('abort', () => reject(new DialError('ssh-handshake', 'h', signal.reason)), { once: true });
      this.pending.push(p);
      for (const w of this.waiters.splice(0)) w();
    });
  };
  private make(): MemConn {
    const c = new MemConn(this.conns.length + 1);
    this.conns.push(c);
    return c;
  }
  async nextPending(): Promise<PendingDial> {
    while (this.pending.length === 0) await new Promise<void>((r) => this.waiters.push(r));
    return this.pending.shift()!;
  }
}

const host = { name: 'h' };
const pools: HostPool<{ name: string }, MemConn>[] = [];
afterEach(async () => {
  for (const p of pools.splice(0)) await p.close();
});

function makePool(dialer: Dialer, opts: { idleTimeoutMs?: number } = {}): { pool: HostPool<{ name: string }, MemConn>; registry: Registry } {
  const registry = new Registry();
  const pool = new HostPool<{ name: string }, MemConn>({
    dial: dialer.dial,
    logger: silentLogger(),
    metrics: createKvmPoolMetrics(registry),
    idleTimeoutMs: opts.idleTimeoutMs ?? 0,
  });
  pools.push(pool);
  return { pool, registry };
}

async function metric(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = m?.values.find((val) => Object.entries(labels).every(([k, want]) => val.labels[k] === want));
  return v?.value ?? 0;
}

const ok = (c: MemConn): Promise<number> => Promise.resolve(c.id);

describe('HostPool', () => {
  it('dials one connection per host, lazily, and shares it between concurrent callers', async () => {
    const dialer = new Dialer();
    dialer.auto = true;
    const { pool, registry } = makePool(dialer);
    expect(dialer.dials).toBe(0);
    const ids = await Promise.all(Array.from({ length: 8 }, () => pool.call(host, ok, AbortSignal.timeout(5_000))));
    expect(new Set(ids)).toEqual(new Set([1]));
    expect(dialer.dials).toBe(1);
    expect(await metric(registry, 'proxy_operator_kvm_dials_total', { host: 'h', stage: 'ok', outcome: 'ok' })).toBe(1);
    expect(await metric(registry, 'proxy_operator_kvm_open_connections')).toBe(1);
  });

  it('does not cache a failed dial: the next caller dials again', async () => {
    const dialer = new Dialer();
    const { pool, registry } = makePool(dialer);
    const first = pool.call(host, ok, AbortSignal.timeout(5_000));
    (await dialer.nextPending()).reject(new DialError('tcp', 'h', new Error('refused')));
    await expect(first).rejects.toMatchObject({ stage: 'tcp' });
    const second = pool.call(host, ok, AbortSignal.timeout(5_000));
    (await dialer.nextPending()).resolve();
    expect(await second).toBe(1);
    expect(dialer.dials).toBe(2);
    expect(await metric(registry, 'proxy_operator_kvm_dials_total', { stage: 'tcp', outcome: 'error' })).toBe(1);
  });

  it('a caller waiting for the dial slot gives up at its own deadline while the dial is still pending', async () => {
    const dialer = new Dialer();
    const { pool } = makePool(dialer);
    const holder = pool.call(host, ok, new AbortController().signal);
    const dial = await dialer.nextPending();
    const waiterCtl = new AbortController();
    const waiter = pool.call(host, ok, waiterCtl.signal);
    await waitFor(() => pool.stats()[0]!.waiting === 1, 'the second caller to wait for the slot');
    waiterCtl.abort(new DOMException('deadline', 'TimeoutError'));
    await expect(waiter).rejects.toBeInstanceOf(DeadlineError);
    expect(dial.signal.aborted).toBe(false); // the holder's dial goes on
    expect(pool.stats()[0]).toMatchObject({ dialing: true, waiting: 0 });
    dial.resolve();
    expect(await holder).toBe(1);
  });

  it('an uncontended caller whose signal already ended still gets the live connection; without one it does not dial', async () => {
    const dialer = new Dialer();
    dialer.auto = true;
    const { pool } = makePool(dialer);
    const ended = AbortSignal.abort(new DOMException('deadline', 'TimeoutError'));
    await expect(pool.call(host, ok, ended)).rejects.toBeInstanceOf(DeadlineError);
    expect(dialer.dials).toBe(0);
    await pool.call(host, ok, AbortSignal.timeout(5_000));
    let ran = false;
    await expect(
      pool.call(
        host,
        async (c) => {
          ran = true;
          return c.id;
        },
        ended,
      ),
    ).rejects.toBeInstanceOf(DeadlineError);
    expect(ran).toBe(true);
    // Nothing was interrupted: the connection stays.
    expect(dialer.conns[0]!.closed).toBe(false);
    expect(await pool.call(host, ok, AbortSignal.timeout(5_000))).toBe(1);
  });

  it('call(): a signal ending mid-call rejects at once and drops the connection; the next caller redials', async () => {
    const dialer = new Dialer();
    dialer.auto = true;
    const { pool } = makePool(dialer);
    const ctl = new AbortController();
    let started!: () => void;
    const inCall = new Promise<void>((r) => (started = r));
    const p = pool.call(
      host,
      (c, s) => {
        started();
        return c.rpc(s).promise;
      },
      ctl.signal,
    );
    await inCall;
    ctl.abort(new Error('job cancelled'));
    await expect(p).rejects.toBeInstanceOf(KvmAbortedError);
    expect(dialer.conns[0]!.destroyed).toBeDefined();
    expect(await pool.call(host, ok, AbortSignal.timeout(5_000))).toBe(2);
    expect(dialer.dials).toBe(2);
  });

  it('call(): a connection that dies mid-call is replaced for the next caller', async () => {
    const dialer = new Dialer();
    dialer.auto = true;
    const { pool } = makePool(dialer);
    const p = pool.call(
      host,
      (c, s) => {
        const r = c.rpc(s);
        queueMicrotask(() => c.die(new Error('link lost')));
        return r.promise;
      },
      AbortSignal.timeout(5_000),
    );
    await expect(p).rejects.toThrow('link lost');
    expect(await pool.call(host, ok, AbortSignal.timeout(5_000))).toBe(2);
  });

  it('probe(): a signal ending abandons the RPC and keeps the connection; one abandoned probe makes the next one busy', async () => {
    const dialer = new Dialer();
    dialer.auto = true;
    const { pool, registry } = makePool(dialer);
    let rpc!: { answer: (v: string) => void };
    let started!: () => void;
    const inProbe = new Promise<void>((r) => (started = r));
    const ctl = new AbortController();
    const probe = pool.probe(
      host,
      (c, s) => {
        rpc = c.rpc(s);
        started();
        return (rpc as ReturnType<MemConn['rpc']>).promise;
      },
      ctl.signal,
    );
    await inProbe;
    ctl.abort(new DOMException('deadline', 'TimeoutError'));
    await expect(probe).rejects.toBeInstanceOf(DeadlineError);
    expect(dialer.conns[0]!.closed).toBe(false);
    expect(pool.stats()[0]).toMatchObject({ abandonedProbe: true, active: 1 });
    expect(await metric(registry, 'proxy_operator_kvm_calls_in_flight', { host: 'h', mode: 'probe' })).toBe(1);

    await expect(pool.probe(host, ok, AbortSignal.timeout(5_000))).rejects.toBeInstanceOf(ProbeBusyError);
    await expect(pool.probe(host, ok, AbortSignal.timeout(5_000))).rejects.toMatchObject({ code: 'ERR_KVM_PROBE_BUSY' });
    // Work still runs on the same connection meanwhile.
    expect(await pool.call(host, ok, AbortSignal.timeout(5_000))).toBe(1);

    rpc.answer('late');
    await waitFor(() => !pool.stats()[0]!.abandonedProbe, 'the abandoned probe to settle');
    expect(await pool.probe(host, ok, AbortSignal.timeout(5_000))).toBe(1);
    expect(dialer.dials).toBe(1);
  });

  it('probe(): a second probe timing out beside an abandoned one is aborted, not left waiting', async () => {
    const dialer = new Dialer();
    dialer.auto = true;
    const { pool } = makePool(dialer);
    const signals: AbortSignal[] = [];
    const ctl = new AbortController();
    const slow = (c: MemConn, s: AbortSignal): Promise<string> => {
      signals.push(s);
      return c.rpc(s).promise;
    };
    const a = pool.probe(host, slow, ctl.signal);
    const b = pool.probe(host, slow, ctl.signal);
    await waitFor(() => signals.length === 2, 'both probes to start');
    ctl.abort(new DOMException('deadline', 'TimeoutError'));
    await expect(a).rejects.toBeInstanceOf(DeadlineError);
    await expect(b).rejects.toBeInstanceOf(DeadlineError);
    expect(signals.filter((s) => s.aborted)).toHaveLength(1);
    expect(pool.stats()[0]).toMatchObject({ abandonedProbe: true, active: 1 });
  });

  it('closes a connection left idle, and not while work runs on it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const dialer = new Dialer();
      dialer.auto = true;
      const { pool, registry } = makePool(dialer, { idleTimeoutMs: 1_000 });
      let release!: (v: number) => void;
      const busy = pool.call(host, () => new Promise<number>((r) => (release = r)), AbortSignal.timeout(60_000));
      await vi.advanceTimersByTimeAsync(0);
      expect(pool.stats()[0]?.active).toBe(1);
      await vi.advanceTimersByTimeAsync(5_000);
      expect(dialer.conns[0]!.closed).toBe(false);
      release(7);
      await busy;
      await vi.advanceTimersByTimeAsync(999);
      expect(dialer.conns[0]!.closed).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(dialer.conns[0]!.closed).toBe(true);
      expect(dialer.conns[0]!.closeCalls).toBe(1);
      expect(await metric(registry, 'proxy_operator_kvm_open_connections')).toBe(0);
      expect(await pool.call(host, ok, AbortSignal.timeout(60_000))).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('close() closes every connection, fails waiting callers and rejects new work', async () => {
    const dialer = new Dialer();
    const { pool } = makePool(dialer);
    dialer.auto = true;
    await pool.call({ name: 'a' }, ok, AbortSignal.timeout(5_000));
    dialer.auto = false;
    const dialing = pool.call({ name: 'b' }, ok, new AbortController().signal);
    await dialer.nextPending();
    const waiting = pool.call({ name: 'b' }, ok, new AbortController().signal);
    await waitFor(() => pool.stats().find((s) => s.host === 'b')?.waiting === 1, 'a waiter');
    await pool.close();
    expect(dialer.conns[0]!.closed).toBe(true);
    await expect(dialing).rejects.toBeInstanceOf(PoolClosedError);
    await expect(waiting).rejects.toBeInstanceOf(PoolClosedError);
    await expect(pool.call({ name: 'a' }, ok, AbortSignal.timeout(5_000))).rejects.toBeInstanceOf(PoolClosedError);
    await expect(pool.probe({ name: 'a' }, ok, AbortSignal.timeout(5_000))).rejects.toBeInstanceOf(PoolClosedError);
  });
});
