/**
 * A libvirt daemon that misbehaves on command (the in-process fake's knobs), driving the real client
 * and host pool: a PING flood from a peer that never reads, a connection that answers PINGs but not
 * calls (through the real SSH streamlocal path and the KVM health check), and a 4 MiB error message.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import { PeerNotReadingError, type LibvirtError } from '../../src/kvm/libvirt/index.ts';
import { createKvmHostPool, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { checkKvmHost } from '../../src/providers/kvm/check.ts';
import { kvmHostSchema } from '../../src/providers/kvm/config.ts';
import { FakeLibvirtServer } from '../fakes/libvirt/index.ts';
import { openOnFake, type FakeHarness } from '../fakes/libvirt/harness.ts';
import { FakeSshServer } from '../fakes/ssh/index.ts';
import { waitFor } from '../support/wait.ts';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function onFake(clientOptions: Parameters<typeof openOnFake>[1] = {}): Promise<FakeHarness> {
  const h = await openOnFake({}, { keepalive: false, ...clientOptions });
  closers.push(() => h.server.close());
  closers.push(() => h.conn.close());
  return h;
}

describe('a libvirt peer that floods PINGs and never reads', () => {
  it('is dropped once the bytes waiting to be written pass the write-queue bound', async () => {
    const { conn, session } = await onFake({ maxQueuedBytes: 64 * 1024 });
    session.stopReading();

    // Each PING owes a PONG the peer never reads: keep flooding until the client gives up on it.
    await waitFor('the connection to drop', () => {
      if (!conn.closed) session.pingFlood(5_000);
      return conn.closed || undefined;
    });

    expect(conn.closeReason).toBeInstanceOf(PeerNotReadingError);
    expect(conn.closeReason?.message).toMatch(/^libvirt peer stopped reading: \d+ bytes waiting to be written \(bound 65536\); connection dropped$/);
  });
});

describe('a libvirt error message of 4 MiB', () => {
  it('is cut to 1,024 characters where the client keeps it', async () => {
    const { conn, server } = await onFake();
    server.faults.failNext('connect_get_hostname', 1, 10, 'x'.repeat(4 * 1024 * 1024 - 256));

    const err = (await conn.getHostname(AbortSignal.timeout(5_000)).catch((e: unknown) => e)) as LibvirtError;

    expect(err.libvirtMessage).toHaveLength(1024);
    expect(err.remote.message).toHaveLength(1024);
    expect(err.message.length).toBeLessThan(1100);
  });
});

describe('a libvirt peer that answers PINGs but not calls', () => {
  it('has its abandoned probe reclaimed: the connection is dropped and the next check dials again', async () => {
    const fake = new FakeLibvirtServer();
    const ssh = new FakeSshServer({ streamlocal: { kind: 'libvirt', server: fake } });
    await ssh.listen();
    closers.push(() => ssh.close());
    const m = await ssh.writeMaterial();
    const host = kvmHostSchema.parse({
      name: 'deaf',
      address: '127.0.0.1',
      port: ssh.port,
      user: ssh.user,
      privateKeyFile: m.keyFile,
      knownHostsFile: m.knownHostsFile,
      pool: 'default',
    });
    const pool: KvmHostPool = createKvmHostPool({ logger: silentLogger(), probeReclaimMs: 300, idleTimeoutMs: 0 });
    closers.push(() => pool.close());
    expect((await checkKvmHost(pool, host, AbortSignal.timeout(10_000))).reason).toBe('Ok');

    // From now on the daemon holds every reply of the probe's first call, but PINGs are still answered.
    const gate = fake.faults.gate('connect_get_lib_version');
    const abandoned = await checkKvmHost(pool, host, AbortSignal.timeout(200));
    expect(abandoned).toMatchObject({ ready: false, reason: 'Timeout' });
    expect((await checkKvmHost(pool, host, AbortSignal.timeout(200))).message).toMatch(/an earlier probe is still waiting/);

    await waitFor('the abandoned probe to be reclaimed', () => {
      const [stats] = pool.stats();
      return (stats && !stats.connected && !stats.abandonedProbe) || undefined;
    });
    gate.openGate();
    fake.faults.reset();
    const again = await checkKvmHost(pool, host, AbortSignal.timeout(10_000));
    expect(again).toMatchObject({ ready: true, reason: 'Ok' });
    expect(fake.sessions.size).toBe(1);
  });
});
