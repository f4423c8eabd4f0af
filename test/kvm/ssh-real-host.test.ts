/** Dial stages against the real OpenSSH 9.2 sshd and libvirtd of the KVM test host. */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DialError } from '../../src/kvm/dial.ts';
import { dialHost, type HostConnection } from '../../src/kvm/host-connection.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { silentLogger } from '../../src/logging.ts';
import { closedPort, generateKeyPair } from '../fakes/ssh/index.ts';
import { kvmHostConfigOf, kvmTestHost } from '../support/kvm-host.ts';

let host: KvmHostConfig;
let dir: string;
const conns: HostConnection[] = [];

beforeAll(async () => {
  const h = await kvmTestHost();
  host = kvmHostConfigOf(h, 'real');
  dir = await mkdtemp(join(tmpdir(), 'kvm-real-ssh-'));
});
afterEach(async () => {
  for (const c of conns.splice(0)) await c.close();
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function dialErr(h: KvmHostConfig): Promise<DialError> {
  const err = await dialHost(h, AbortSignal.timeout(20_000), { logger: silentLogger() }).then(
    (c) => {
      conns.push(c);
      throw new Error('dial unexpectedly succeeded');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DialError);
  expect((err as DialError).message).toBe(((err as DialError).cause as Error).message);
  return err as DialError;
}

describe('dial against the real sshd + libvirtd', () => {
  it('opens qemu:///system through OpenSSH streamlocal', async () => {
    const conn = await dialHost(host, AbortSignal.timeout(20_000), { logger: silentLogger() });
    conns.push(conn);
    expect(await conn.libvirt.getLibVersion(AbortSignal.timeout(10_000))).toBeGreaterThanOrEqual(9_000_000);
  });

  it('ssh-handshake: known_hosts pins another key for [127.0.0.1]:2222', async () => {
    const file = join(dir, 'known_hosts_wrong');
    await writeFile(file, `[${host.address}]:${host.port} ${generateKeyPair().publicKey.split(' ').slice(0, 2).join(' ')}\n`);
    const err = await dialErr({ ...host, knownHostsFile: file });
    expect(err.stage).toBe('ssh-handshake');
    expect(err.hostKey?.reason).toBe('mismatch');
  });

  it('ssh-handshake: a client key sshd does not authorise', async () => {
    const file = join(dir, 'id_other');
    await writeFile(file, generateKeyPair().privateKey, { mode: 0o600 });
    const err = await dialErr({ ...host, privateKeyFile: file });
    expect(err.stage).toBe('ssh-handshake');
    expect((err.cause as Error & { level?: string }).level).toBe('client-authentication');
  });

  it('libvirt-connect: no socket at socketPath', async () => {
    const err = await dialErr({ ...host, socketPath: '/run/libvirt/no-such-sock' });
    expect(err.stage).toBe('libvirt-connect');
  });

  it('libvirt-connect: the daemon refuses the URI', async () => {
    const err = await dialErr({ ...host, uri: 'nosuchdriver:///system' });
    expect(err.stage).toBe('libvirt-connect');
    expect(err.cause).toMatchObject({ code: expect.stringMatching(/^ERR_LIBVIRT/) as unknown });
  });

  it('tcp: nothing listens on the port', async () => {
    const err = await dialErr({ ...host, port: await closedPort() });
    expect(err.stage).toBe('tcp');
  });
});
