import { createHmac, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DialError } from '../../src/kvm/dial.ts';
import { dialHost, type HostConnection } from '../../src/kvm/host-connection.ts';
import { SshHandshakeClosedError } from '../../src/kvm/ssh/connect.ts';
import { fingerprint } from '../../src/kvm/ssh/known-hosts.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { silentLogger } from '../../src/logging.ts';
import { FakeLibvirtServer } from '../fakes/libvirt/server.ts';
import { captureLogger } from '../fakes/libvirt/harness.ts';
import { closedPort, FakeSshServer, generateKeyPair } from '../fakes/ssh/index.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function fakeSsh(options: ConstructorParameters<typeof FakeSshServer>[0] = {}): Promise<FakeSshServer> {
  const srv = new FakeSshServer(options);
  await srv.listen();
  cleanups.push(() => srv.close());
  return srv;
}

async function fakeLibvirt(options: ConstructorParameters<typeof FakeLibvirtServer>[0] = {}): Promise<FakeLibvirtServer> {
  const srv = new FakeLibvirtServer({ keepalive: false, ...options });
  cleanups.push(() => srv.close());
  return srv;
}

function hostFor(port: number, material: { keyFile: string; knownHostsFile: string }, over: Partial<KvmHostConfig> = {}): KvmHostConfig {
  return {
    name: 'h1',
    address: '127.0.0.1',
    port,
    user: 'root',
    privateKeyFile: material.keyFile,
    knownHostsFile: material.knownHostsFile,
    insecureIgnoreHostKey: false,
    pool: 'default',
    socketPath: '/var/run/libvirt/libvirt-sock',
    uri: 'qemu:///system',
    ...over,
  };
}

async function dial(host: KvmHostConfig, signal = AbortSignal.timeout(10_000), logger = silentLogger()): Promise<HostConnection> {
  const conn = await dialHost(host, signal, { logger, keepalive: false, ssh: { readyTimeoutMs: 10_000 } });
  cleanups.push(() => conn.close());
  return conn;
}

async function dialError(host: KvmHostConfig, signal?: AbortSignal): Promise<DialError> {
  const err = await dial(host, signal).then(
    () => {
      throw new Error('dial unexpectedly succeeded');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DialError);
  const d = err as DialError;
  expect(d.code).toBe('ERR_KVM_DIAL');
  expect(d.retryable).toBe(true);
  expect(d.host).toBe('h1');
  // The message is the original one, unchanged; the original error is the cause.
  expect(d.cause).toBeInstanceOf(Error);
  expect(d.message).toBe((d.cause as Error).message);
  return d;
}

describe('dial through SSH to libvirt', () => {
  it('opens libvirt over a streamlocal channel to the configured socket and closes all layers together', async () => {
    const libvirt = await fakeLibvirt();
    const ssh = await fakeSsh({ streamlocal: { kind: 'libvirt', server: libvirt } });
    const conn = await dial(hostFor(ssh.port, await ssh.writeMaterial(), { socketPath: '/run/libvirt/libvirt-sock' }));
    expect(await conn.libvirt.getLibVersion(AbortSignal.timeout(5_000))).toBeGreaterThan(0);
    expect(ssh.events.find((e) => e.type === 'streamlocal')?.socketPath).toBe('/run/libvirt/libvirt-sock');
    expect(libvirt.requests.map((r) => r.name).slice(0, 3)).toEqual(['auth_list', 'connect_supports_feature', 'connect_open']);

    const closed = ssh.nextEvent('tcp-close');
    const reasons: Error[] = [];
    conn.onClose((r) => reasons.push(r));
    await conn.close();
    await closed;
    expect(conn.closed).toBe(true);
    expect(conn.libvirt.closed).toBe(true);
    expect(reasons).toHaveLength(1);
  });

  it('reports closure once when the SSH link dies under it, and the libvirt layer is closed too', async () => {
    const libvirt = await fakeLibvirt();
    const ssh = await fakeSsh({ streamlocal: { kind: 'libvirt', server: libvirt } });
    const conn = await dial(hostFor(ssh.port, await ssh.writeMaterial()));
    const reasons: Error[] = [];
    const closed = new Promise<Error>((resolve) => conn.onClose(resolve));
    conn.onClose((r) => reasons.push(r));
    ssh.killConnections();
    await closed;
    expect(conn.libvirt.closed).toBe(true);
    await expect(conn.libvirt.getLibVersion(AbortSignal.timeout(1_000))).rejects.toMatchObject({ code: 'ERR_LIBVIRT_CONNECTION_LOST' });
    expect(reasons).toHaveLength(1);
  });

  it('when the libvirt side dies first, the SSH connection is closed with it', async () => {
    const libvirt = await fakeLibvirt();
    const ssh = await fakeSsh({ streamlocal: { kind: 'libvirt', server: libvirt } });
    const sessionP = libvirt.nextSession();
    const conn = await dial(hostFor(ssh.port, await ssh.writeMaterial()));
    const session = await sessionP;
    const closed = new Promise<Error>((resolve) => conn.onClose(resolve));
    const sshGone = ssh.nextEvent('tcp-close');
    session.destroy(); // the daemon drops the client: the channel closes under libvirt
    await closed;
    await sshGone;
    expect(conn.libvirt.closed).toBe(true);
  });

  it('accepts a hashed known_hosts entry for [host]:port', async () => {
    const libvirt = await fakeLibvirt();
    const ssh = await fakeSsh({ streamlocal: { kind: 'libvirt', server: libvirt } });
    const salt = randomBytes(20);
    const hash = createHmac('sha1', salt).update(`[127.0.0.1]:${ssh.port}`).digest();
    const keyPart = ssh.hostKey.publicKey.split(' ').slice(0, 2).join(' ');
    const material = await ssh.writeMaterial(`|1|${salt.toString('base64')}|${hash.toString('base64')} ${keyPart}`);
    const conn = await dial(hostFor(ssh.port, material));
    expect(conn.closed).toBe(false);
  });

  it('insecureIgnoreHostKey skips verification and warns at every dial', async () => {
    const libvirt = await fakeLibvirt();
    const ssh = await fakeSsh({ streamlocal: { kind: 'libvirt', server: libvirt } });
    const material = await ssh.writeMaterial('# nothing known');
    const log = captureLogger('warn');
    const host = hostFor(ssh.port, material, { insecureIgnoreHostKey: true, knownHostsFile: undefined });
    await dial(host, AbortSignal.timeout(10_000), log.logger);
    await dial(host, AbortSignal.timeout(10_000), log.logger);
    const warnings = log.lines.filter((l) => l.level === 40 && String(l.msg).includes('insecureIgnoreHostKey'));
    expect(warnings).toHaveLength(2);
    expect(JSON.stringify(log.lines)).not.toContain('PRIVATE KEY');
  });
});

describe('dial stages', () => {
  it('ssh-material: a missing private key file', async () => {
    const ssh = await fakeSsh();
    const material = await ssh.writeMaterial();
    const err = await dialError(hostFor(ssh.port, { ...material, keyFile: join(material.dir, 'nope') }));
    expect(err.stage).toBe('ssh-material');
    expect((err.cause as NodeJS.ErrnoException).code).toBe('ENOENT');
    expect(ssh.accepted).toBe(0);
  });

  it('ssh-material: a missing known_hosts file', async () => {
    const ssh = await fakeSsh();
    const material = await ssh.writeMaterial();
    const err = await dialError(hostFor(ssh.port, { ...material, knownHostsFile: join(material.dir, 'nope') }));
    expect(err.stage).toBe('ssh-material');
    expect(ssh.accepted).toBe(0);
  });

  it('ssh-material: a key file that is not a private key', async () => {
    const ssh = await fakeSsh();
    const material = await ssh.writeMaterial();
    const err = await dialError(hostFor(ssh.port, { ...material, keyFile: material.knownHostsFile }));
    expect(err.stage).toBe('ssh-material');
    expect(err.cause).toMatchObject({ code: 'ERR_KVM_SSH_MATERIAL' });
  });

  it('tcp: nothing listens on the port', async () => {
    const ssh = await fakeSsh();
    const material = await ssh.writeMaterial();
    const err = await dialError(hostFor(await closedPort(), material));
    expect(err.stage).toBe('tcp');
    expect((err.cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
  });

  it('ssh-handshake: the server presents a host key other than the known one', async () => {
    const ssh = await fakeSsh();
    const other = generateKeyPair().publicKey.split(' ').slice(0, 2).join(' ');
    const err = await dialError(hostFor(ssh.port, await ssh.writeMaterial(`[127.0.0.1]:${ssh.port} ${other}`)));
    expect(err.stage).toBe('ssh-handshake');
    expect((err.cause as Error & { level?: string }).level).toBe('handshake');
    expect(err.hostKey).toEqual({
      reason: 'mismatch',
      knownHostsName: `[127.0.0.1]:${ssh.port}`,
      keyType: 'ssh-ed25519',
      fingerprint: fingerprint(Buffer.from(ssh.hostKey.publicKey.split(' ')[1]!, 'base64')),
    });
    expect(ssh.events.some((e) => e.type === 'auth')).toBe(false);
  });

  it('ssh-handshake: the host is not in known_hosts (an entry for another port does not count)', async () => {
    const ssh = await fakeSsh();
    const keyPart = ssh.hostKey.publicKey.split(' ').slice(0, 2).join(' ');
    const err = await dialError(hostFor(ssh.port, await ssh.writeMaterial(`127.0.0.1 ${keyPart}\n[127.0.0.1]:1 ${keyPart}`)));
    expect(err.stage).toBe('ssh-handshake');
    expect(err.hostKey?.reason).toBe('unknown');
  });

  it('ssh-handshake: authentication is rejected', async () => {
    const ssh = await fakeSsh({ behaviour: 'reject-auth' });
    const err = await dialError(hostFor(ssh.port, await ssh.writeMaterial()));
    expect(err.stage).toBe('ssh-handshake');
    expect((err.cause as Error & { level?: string }).level).toBe('client-authentication');
  });

  it('ssh-handshake: the server closes right after its banner', async () => {
    const ssh = await fakeSsh({ behaviour: 'close-after-banner' });
    const err = await dialError(hostFor(ssh.port, await ssh.writeMaterial()));
    expect(err.stage).toBe('ssh-handshake');
    expect(err.cause).toBeInstanceOf(SshHandshakeClosedError);
  });

  it('ssh-handshake: a server that never answers, ended by the caller, and the socket is torn down', async () => {
    const ssh = await fakeSsh({ behaviour: 'silent' });
    const material = await ssh.writeMaterial();
    const ctl = new AbortController();
    const clientSpoke = ssh.nextEvent('silent-data'); // TCP is up and the client has sent its banner
    const pending = dialError(hostFor(ssh.port, material), ctl.signal);
    await clientSpoke;
    const serverSawClose = ssh.nextEvent('tcp-close');
    ctl.abort(new Error('caller gave up'));
    const err = await pending;
    expect(err.stage).toBe('ssh-handshake');
    expect(err.message).toBe('caller gave up');
    await serverSawClose;
  });

  it('ssh-handshake: ssh2 readyTimeout (client-timeout after TCP was up)', async () => {
    const ssh = await fakeSsh({ behaviour: 'silent' });
    const host = hostFor(ssh.port, await ssh.writeMaterial());
    const err = await dialHost(host, AbortSignal.timeout(10_000), { logger: silentLogger(), ssh: { readyTimeoutMs: 50 } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DialError);
    expect((err as DialError).stage).toBe('ssh-handshake');
    expect(((err as DialError).cause as Error & { level?: string }).level).toBe('client-timeout');
  });

  it('libvirt-connect: the server refuses the streamlocal channel', async () => {
    const ssh = await fakeSsh({ streamlocal: { kind: 'reject' } });
    const err = await dialError(hostFor(ssh.port, await ssh.writeMaterial()));
    expect(err.stage).toBe('libvirt-connect');
    expect(ssh.events.some((e) => e.type === 'streamlocal')).toBe(true);
  });

  it('libvirt-connect: the socket path does not exist on the server', async () => {
    const ssh = await fakeSsh({ streamlocal: { kind: 'socket', path: '/nonexistent/libvirt-sock' } });
    const err = await dialError(hostFor(ssh.port, await ssh.writeMaterial()));
    expect(err.stage).toBe('libvirt-connect');
  });

  it('libvirt-connect: the daemon offers only SASL', async () => {
    const libvirt = await fakeLibvirt({ authTypes: [1] });
    const ssh = await fakeSsh({ streamlocal: { kind: 'libvirt', server: libvirt } });
    const err = await dialError(hostFor(ssh.port, await ssh.writeMaterial()));
    expect(err.stage).toBe('libvirt-connect');
    expect(err.cause).toMatchObject({ code: 'ERR_LIBVIRT_AUTH' });
    // The failed dial does not leave the SSH connection behind.
    await ssh.nextEvent('tcp-close', true);
  });
});
