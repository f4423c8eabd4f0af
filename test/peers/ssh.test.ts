/**
 * An SSH server that misbehaves on command (ssh2's Server on loopback, `test/fakes/ssh`), driving the
 * real KVM transport through the host pool: no banner, a banner and then no key exchange, an
 * authentication that is never answered (each ended by the pool's dial timeout, which the error
 * names with the stage), a peer that opens the libvirt channel, grants itself out of flow control,
 * floods PINGs and never reads (dropped once the SSH socket's unwritten bytes pass the bound), a server
 * that drops the connection in the middle of a call, and a host key changed under a live connection.
 * Host keys wrong at the first dial are in test/kvm/ssh-dial.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import { DialError } from '../../src/kvm/dial.ts';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { createKvmHostPool, type KvmHostPool, type KvmHostPoolOptions } from '../../src/kvm/pool/index.ts';
import { kvmHostSchema, type KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { FakeLibvirtServer } from '../fakes/libvirt/index.ts';
import { FakeSshServer, type FakeSshServerOptions } from '../fakes/ssh/index.ts';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const DIAL_TIMEOUT_MS = 300;

async function peer(options: FakeSshServerOptions): Promise<{ ssh: FakeSshServer; host: KvmHostConfig }> {
  const ssh = new FakeSshServer(options);
  await ssh.listen();
  closers.push(() => ssh.close());
  const m = await ssh.writeMaterial();
  const host = kvmHostSchema.parse({
    name: 'peer',
    address: '127.0.0.1',
    port: ssh.port,
    user: ssh.user,
    privateKeyFile: m.keyFile,
    knownHostsFile: m.knownHostsFile,
    pool: 'default',
  });
  return { ssh, host };
}

function libvirtFake(): FakeLibvirtServer {
  const fake = new FakeLibvirtServer({ keepalive: false });
  closers.push(() => fake.close());
  return fake;
}

/** A pool whose own dial bound is the only one that can end a dial (SSH's ready timeout is far beyond it). */
function pool(over: Partial<KvmHostPoolOptions> = {}): KvmHostPool {
  const p = createKvmHostPool({
    logger: silentLogger(),
    idleTimeoutMs: 0,
    dialTimeoutMs: DIAL_TIMEOUT_MS,
    ...over,
    dialOptions: { keepalive: false, ssh: { readyTimeoutMs: 120_000, keepaliveIntervalMs: 0 }, ...over.dialOptions },
  });
  closers.push(() => p.close());
  return p;
}

async function hostname(p: KvmHostPool, host: KvmHostConfig): Promise<string> {
  return p.call(host, (c, signal) => c.libvirt.getHostname(signal), AbortSignal.timeout(30_000));
}

async function failure(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => {
      throw new Error('expected a failure');
    },
    (e: unknown) => e as Error,
  );
}

describe('a dial that runs past the pool dial timeout', () => {
  it.each([
    ['accepts TCP and never sends its banner', 'silent'],
    ['sends its banner, then nothing during the key exchange', 'banner-then-silent'],
    ['never answers the authentication request', 'auth-silent'],
  ] as const)('a server that %s: the dial fails naming the stage and the timeout, and the socket is closed', async (_what, behaviour) => {
    const { ssh, host } = await peer({ behaviour });
    const p = pool();
    const serverSawClose = ssh.nextEvent('tcp-close');

    const err = await failure(hostname(p, host));

    expect(err).toBeInstanceOf(DialError);
    expect((err as DialError).stage).toBe('ssh-handshake');
    expect((err as DialError).code).toBe('ERR_KVM_DIAL_TIMEOUT');
    expect(err.message).toBe(`dial of KVM host "peer" timed out after ${DIAL_TIMEOUT_MS} ms in stage ssh-handshake`);
    await serverSawClose;
    if (behaviour === 'auth-silent') expect(ssh.events.some((e) => e.type === 'auth')).toBe(true);
    expect(p.stats()[0]).toMatchObject({ connected: false, dialing: false });
  });
});

describe('a peer that floods the libvirt channel and never reads', () => {
  it('is dropped once the SSH socket holds more unwritten bytes than the bound, and memory does not grow with the flood', async () => {
    const fake = libvirtFake();
    const { ssh, host } = await peer({ streamlocal: { kind: 'libvirt', server: fake, ignoreFlowControl: true } });
    const bound = 1024 * 1024;
    const p = pool({ dialOptions: { keepalive: false, ssh: { maxUnwrittenBytes: bound } } });
    const sessionP = fake.nextSession();
    const conn = await p.call(host, async (c: HostConnection) => c, AbortSignal.timeout(30_000));
    const session = await sessionP;
    const closed = new Promise<Error>((resolve) => conn.onClose(resolve));
    const [serverSocket] = ssh.clientSockets;

    // From now on every PONG the client owes stays on its side: the server reads nothing at all.
    ssh.stopReadingTcp();
    const before = process.memoryUsage();
    let peakArrayBuffers = before.arrayBuffers;
    let peakRss = before.rss;
    let pings = 0;
    const maxPings = 320_000; // 9 MB of PINGs, each owing a PONG of some 80 bytes through SSH: four times what the bound needs
    while (!conn.closed && pings < maxPings) {
      if ((serverSocket?.writableLength ?? 0) < 256 * 1024) {
        session.pingFlood(2_000);
        pings += 2_000;
      }
      const now = process.memoryUsage();
      peakArrayBuffers = Math.max(peakArrayBuffers, now.arrayBuffers);
      peakRss = Math.max(peakRss, now.rss);
      await new Promise((resolve) => setImmediate(resolve));
    }

    const grown = `array buffers +${(peakArrayBuffers - before.arrayBuffers) >> 20} MiB, RSS +${(peakRss - before.rss) >> 20} MiB`;
    expect(conn.closed, `not dropped after ${pings} PINGs (${grown})`).toBe(true);
    const reason = await closed;
    expect(reason).toMatchObject({ code: 'ERR_KVM_SSH_PEER_NOT_READING' });
    expect(reason.message).toMatch(
      new RegExp(
        `^SSH peer 127\\.0\\.0\\.1:${ssh.port} stopped reading: \\d+ bytes waiting to be written to the socket \\(bound ${bound}\\); connection dropped$`,
      ),
    );
    // The bound is 1 MiB (the kernel's socket buffers take a few MiB first); without it the same flood
    // left 27 MiB of PONGs waiting in the process, and growing.
    expect(peakArrayBuffers - before.arrayBuffers, grown).toBeLessThan(16 * 1024 * 1024);
    expect(peakRss - before.rss, grown).toBeLessThan(128 * 1024 * 1024);
    expect(p.stats()[0]?.connected).toBe(false);
  });
});

describe('a server that drops the connection in the middle of a call', () => {
  it('fails the call with the connection loss, and the next call dials again', async () => {
    const fake = libvirtFake();
    const { ssh, host } = await peer({ streamlocal: { kind: 'libvirt', server: fake } });
    const p = pool({ dialTimeoutMs: 10_000 });
    expect(await hostname(p, host)).toBeTruthy();

    const gate = fake.faults.gate('connect_get_hostname');
    const pending = failure(hostname(p, host));
    await gate.untilHeld(1);
    ssh.killConnections();
    const err = await pending;

    expect(err).toMatchObject({ code: 'ERR_LIBVIRT_CONNECTION_LOST', retryable: true });
    expect(err.message).toMatch(/connection/i);
    fake.faults.reset();
    expect(await hostname(p, host)).toBeTruthy();
    expect(ssh.accepted).toBe(2);
  });
});

describe('a host key changed under a live connection', () => {
  it('is refused at the re-key: the connection drops, and the redial is refused as a mismatch', async () => {
    const fake = libvirtFake();
    const { ssh, host } = await peer({ streamlocal: { kind: 'libvirt', server: fake } });
    const p = pool({ dialTimeoutMs: 10_000 });
    const conn = await p.call(host, async (c: HostConnection) => c, AbortSignal.timeout(30_000));
    const closed = new Promise<Error>((resolve) => conn.onClose(resolve));

    ssh.changeHostKey();
    const reason = await closed;

    expect(reason.message).toMatch(/host denied/i);
    expect(p.stats()[0]?.connected).toBe(false);
    const err = await failure(hostname(p, host));
    expect(err).toBeInstanceOf(DialError);
    expect((err as DialError).stage).toBe('ssh-handshake');
    expect((err as DialError).hostKey?.reason).toBe('mismatch');
    expect(fake.requests.filter((r) => r.name === 'connect_get_hostname')).toHaveLength(0);
  });
});
