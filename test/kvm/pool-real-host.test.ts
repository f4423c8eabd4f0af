/**
 * The host pool against the real test host: libvirtd (qemu:///system) behind the real sshd on
 * 127.0.0.1:2222, made by scripts/kvm-test-host.sh. libvirtd is frozen with SIGSTOP in some
 * tests; afterEach always sends SIGCONT.
 */
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DeadlineError } from '../../src/errors.ts';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { createKvmHostPool, createKvmPoolMetrics, ProbeBusyError, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { silentLogger } from '../../src/logging.ts';
import { waitFor } from '../fakes/libvirt/harness.ts';
import { FakeSshServer } from '../fakes/ssh/index.ts';
import { kvmHostConfigOf, kvmTestHost, libvirtdPid, type KvmTestHost } from '../support/kvm-host.ts';

let testHost: KvmTestHost;
let host: KvmHostConfig;
let frozenPid: number | undefined;
const pools: KvmHostPool[] = [];
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  testHost = await kvmTestHost();
  host = kvmHostConfigOf(testHost, 'local-kvm');
});

function thaw(): void {
  if (frozenPid !== undefined) process.kill(frozenPid, 'SIGCONT');
  frozenPid = undefined;
}

async function freezeLibvirtd(): Promise<void> {
  frozenPid = await libvirtdPid(testHost);
  process.kill(frozenPid, 'SIGSTOP');
}

afterEach(async () => {
  thaw();
  for (const p of pools.splice(0)) await p.close();
  for (const c of cleanups.splice(0)) await c();
});
afterAll(thaw);

function makePool(idleTimeoutMs = 0): { pool: KvmHostPool; registry: Registry; dials: () => Promise<number> } {
  const registry = new Registry();
  const pool = createKvmHostPool({ logger: silentLogger(), metrics: createKvmPoolMetrics(registry), idleTimeoutMs });
  pools.push(pool);
  const dials = async (): Promise<number> => {
    const m = (await registry.getMetricsAsJSON()).find((x) => x.name === 'proxy_operator_kvm_dials_total');
    return (m?.values ?? []).reduce((sum, v) => sum + v.value, 0);
  };
  return { pool, registry, dials };
}

const libVersion = (c: HostConnection, s: AbortSignal): Promise<number> => c.libvirt.getLibVersion(s);

describe('host pool on the real KVM test host', () => {
  it('concurrent jobs share one SSH + libvirt connection (exactly one dial)', async () => {
    const { pool, dials } = makePool();
    const seen = new Set<HostConnection>();
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        pool.call(
          host,
          (c, s) => {
            seen.add(c);
            return c.libvirt.getLibVersion(s);
          },
          AbortSignal.timeout(20_000),
        ),
      ),
    );
    expect(results.every((v) => v >= 9_000_000)).toBe(true);
    expect(seen.size).toBe(1);
    expect(await dials()).toBe(1);
  });

  it('a probe against a frozen libvirtd times out at its deadline; after SIGCONT the same connection serves the next call', async () => {
    const { pool, dials } = makePool();
    const first = await pool.call(host, async (c, s) => ({ conn: c, v: await c.libvirt.getLibVersion(s) }), AbortSignal.timeout(20_000));
    await freezeLibvirtd();

    await expect(pool.probe(host, libVersion, AbortSignal.timeout(300))).rejects.toBeInstanceOf(DeadlineError);
    // The abandoned probe is still waiting: a further probe is refused at once.
    await expect(pool.probe(host, libVersion, AbortSignal.timeout(20_000))).rejects.toBeInstanceOf(ProbeBusyError);
    expect(first.conn.closed).toBe(false);

    thaw();
    await waitFor(() => !pool.stats()[0]!.abandonedProbe, 'the abandoned probe to get its late answer', 20_000);
    const next = await pool.call(host, async (c, s) => ({ conn: c, v: await c.libvirt.getLibVersion(s) }), AbortSignal.timeout(20_000));
    expect(next.conn).toBe(first.conn);
    expect(await pool.probe(host, libVersion, AbortSignal.timeout(20_000))).toBe(first.v);
    expect(await dials()).toBe(1);
  });

  it('call() drops the connection when its signal ends mid-call, while probe() keeps it', async () => {
    const { pool, dials } = makePool();
    const conn1 = await pool.call(host, async (c) => c, AbortSignal.timeout(20_000));

    await freezeLibvirtd();
    await expect(pool.probe(host, libVersion, AbortSignal.timeout(200))).rejects.toBeInstanceOf(DeadlineError);
    expect(conn1.closed).toBe(false);
    await expect(pool.call(host, libVersion, AbortSignal.timeout(200))).rejects.toBeInstanceOf(DeadlineError);
    expect(conn1.closed).toBe(true);
    thaw();

    const conn2 = await pool.call(
      host,
      async (c, s) => {
        await c.libvirt.getLibVersion(s);
        return c;
      },
      AbortSignal.timeout(20_000),
    );
    expect(conn2).not.toBe(conn1);
    expect(await dials()).toBe(2);
  });

  it('closes an idle connection and redials for the next caller', async () => {
    const { pool, dials } = makePool(100);
    const conn1 = await pool.call(
      host,
      async (c, s) => {
        await c.libvirt.getLibVersion(s);
        return c;
      },
      AbortSignal.timeout(20_000),
    );
    await waitFor(() => conn1.closed, 'the idle connection to close', 10_000);
    expect(pool.stats()[0]!.connected).toBe(false);
    await pool.call(host, libVersion, AbortSignal.timeout(20_000));
    expect(await dials()).toBe(2);
  });

  it('callers for a host whose SSH port never answers give up at their deadline while the dial is still pending', async () => {
    const silent = new FakeSshServer({ behaviour: 'silent' });
    await silent.listen();
    cleanups.push(() => silent.close());
    // Real key and known_hosts: the dial gets as far as the SSH handshake and waits there.
    const dead: KvmHostConfig = { ...host, name: 'dead-host', port: silent.port };
    const { pool } = makePool();

    const holderCtl = new AbortController();
    const holder = pool.call(dead, libVersion, holderCtl.signal);
    let holderSettled = false;
    void holder.catch(() => undefined).finally(() => (holderSettled = true));
    await silent.nextEvent('silent-data', true);

    const callerCtl = new AbortController();
    const caller = pool.probe(dead, libVersion, callerCtl.signal);
    await waitFor(() => pool.stats().find((s) => s.host === 'dead-host')?.waiting === 1, 'the caller to wait for the dial slot');
    callerCtl.abort(new DOMException('deadline', 'TimeoutError'));
    await expect(caller).rejects.toBeInstanceOf(DeadlineError);
    // Events, not a clock: the caller is out while the dial it waited behind is still pending.
    expect(holderSettled).toBe(false);
    expect(pool.stats().find((s) => s.host === 'dead-host')).toMatchObject({ dialing: true, connected: false });

    holderCtl.abort(new Error('test done'));
    await expect(holder).rejects.toMatchObject({ code: 'ERR_KVM_DIAL', stage: 'ssh-handshake' });
  });
});
