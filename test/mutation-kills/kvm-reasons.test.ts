/**
 * The KVM check's reasons and messages on a stand-in pool whose probe answers or fails as each case
 * needs: the mapping from a failed probe to the reason a user sees in ProviderHealth, and the
 * verdicts on a pool. The real daemon, sshd and faults are in test/providers/kvm-health.test.ts;
 * this is for the mutation run (docs/testing.md#mutation-testing).
 */
import { describe, expect, test } from 'vitest';
import { DialError, type DialStage } from '../../src/kvm/dial.ts';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { ConnectionLostError, ErrorCode, KeepaliveTimeoutError, LibvirtError, type StoragePoolInfo } from '../../src/kvm/libvirt/index.ts';
import { ProbeBusyError, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { checkKvmHost, kvmFailureReason } from '../../src/providers/kvm/check.ts';
import { kvmHostSchema } from '../../src/providers/kvm/config.ts';

const HOST = kvmHostSchema.parse({
  name: 'beelink',
  address: '10.0.0.5',
  port: 2222,
  user: 'virt',
  pool: 'images',
  privateKeyFile: '/k',
  knownHostsFile: '/kh',
});
const live = (): AbortSignal => new AbortController().signal;
const aborted = (): AbortSignal => AbortSignal.abort();

function remote(code: number, message: string): ConstructorParameters<typeof LibvirtError>[0] {
  return { code, domain: 18, message, level: 2, str1: null, str2: null, str3: null, int1: 0, int2: 0 };
}

const { NO_STORAGE_POOL, INTERNAL_ERROR } = ErrorCode;

interface Daemon {
  libVersion?: number;
  hostname?: string;
  pool?: StoragePoolInfo | Error;
  versionError?: Error;
}

/** A pool whose probe runs the check's function on a connection answering as `daemon` says, or fails with `fails`. */
function poolAnswering(daemon: Daemon, fails?: Error): KvmHostPool & { probes: string[] } {
  const probes: string[] = [];
  const libvirt = {
    getLibVersion: async () => {
      if (daemon.versionError) throw daemon.versionError;
      return daemon.libVersion ?? 10_000_000;
    },
    getHostname: async () => daemon.hostname ?? 'beelink.lan',
    storagePoolLookupByName: async (name: string) => {
      if (daemon.pool instanceof Error) throw daemon.pool;
      return { name, uuid: new Uint8Array(16) };
    },
    storagePoolGetInfo: async () => daemon.pool as StoragePoolInfo,
  };
  const pool = {
    probes,
    probe: async <T>(host: { name: string }, fn: (conn: HostConnection, s: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T> => {
      probes.push(host.name);
      if (fails !== undefined) throw fails;
      return fn({ libvirt } as unknown as HostConnection, signal);
    },
  };
  return pool as unknown as KvmHostPool & { probes: string[] };
}

const RUNNING: StoragePoolInfo = { state: 2, stateWord: 'running', capacity: 100 * 2 ** 30, allocation: 40 * 2 ** 30, available: 60 * 2 ** 30 };

describe('kvmFailureReason', () => {
  test.each<[DialStage, string]>([
    ['ssh-material', 'SSHMaterialUnavailable'],
    ['tcp', 'Unreachable'],
    ['ssh-handshake', 'SSHHandshakeFailed'],
    ['libvirt-connect', 'LibvirtConnectFailed'],
  ])('a dial failing at %s is %s, also wrapped in another error', (stage, reason) => {
    const dial = new DialError(stage, 'beelink', new Error('boom'));
    expect(kvmFailureReason(dial, live())).toBe(reason);
    expect(kvmFailureReason(new Error('probe failed', { cause: dial }), live())).toBe(reason);
  });

  test('a lost connection or a silent keepalive is Unreachable, not an Error', () => {
    expect(kvmFailureReason(new ConnectionLostError('getLibVersion', true), live())).toBe('Unreachable');
    expect(kvmFailureReason(new KeepaliveTimeoutError(5000), live())).toBe('Unreachable');
    expect(kvmFailureReason(new Error('outer', { cause: new KeepaliveTimeoutError(5000) }), live())).toBe('Unreachable');
  });

  test('a daemon error reply is DaemonError; anything else is Error', () => {
    expect(kvmFailureReason(new LibvirtError(remote(INTERNAL_ERROR, 'internal')), live())).toBe('DaemonError');
    expect(kvmFailureReason(new Error('something else'), live())).toBe('Error');
  });

  test('a busy probe is a Timeout; so is anything once the check deadline passed', () => {
    expect(kvmFailureReason(new ProbeBusyError('beelink'), live())).toBe('Timeout');
    expect(kvmFailureReason(new Error('x', { cause: new ProbeBusyError('beelink') }), live())).toBe('Timeout');
    expect(kvmFailureReason(new DialError('tcp', 'beelink', new Error('refused')), aborted())).toBe('Timeout');
  });
});

describe('checkKvmHost', () => {
  test('a running pool is Ok, with the version, hostname and free space in the message and details', async () => {
    const pool = poolAnswering({ libVersion: 9_000_123, hostname: 'beelink.lan', pool: RUNNING });
    const r = await checkKvmHost(pool, HOST, live());
    expect(pool.probes).toEqual(['beelink']);
    expect(r).toMatchObject({
      target: 'beelink',
      ready: true,
      reason: 'Ok',
      message: 'libvirt 9.0.123 on beelink.lan, pool images running, 60.0 GiB free',
      details: {
        address: '10.0.0.5:2222',
        user: 'virt',
        pool: 'images',
        libvirtVersion: '9.0.123',
        hostname: 'beelink.lan',
        poolState: 'running',
        availableBytes: String(60 * 2 ** 30),
      },
    });
    expect(r.durationSeconds).toBeGreaterThanOrEqual(0);
  });

  test('a version with every part set is shown major.minor.micro', async () => {
    const r = await checkKvmHost(poolAnswering({ libVersion: 10_002_003, pool: { ...RUNNING, available: 1.25 * 2 ** 30 } }), HOST, live());
    expect(r.message).toBe('libvirt 10.2.3 on beelink.lan, pool images running, 1.3 GiB free');
  });

  test('a pool that is not running is PoolInactive, naming its state', async () => {
    const r = await checkKvmHost(poolAnswering({ pool: { ...RUNNING, state: 0, stateWord: 'inactive' } }), HOST, live());
    expect(r).toMatchObject({
      ready: false,
      reason: 'PoolInactive',
      message: 'storage pool "images" on beelink.lan is inactive',
      details: { poolState: 'inactive' },
    });
  });

  test('a missing pool is PoolNotFound, not a failure of the connection', async () => {
    const r = await checkKvmHost(poolAnswering({ pool: new LibvirtError(remote(NO_STORAGE_POOL, 'no pool')) }), HOST, live());
    expect(r).toMatchObject({ ready: false, reason: 'PoolNotFound', message: 'storage pool "images" not found on beelink.lan' });
    expect(r.details).not.toHaveProperty('poolState');
  });

  test('another daemon error on the pool lookup is DaemonError with its message', async () => {
    const r = await checkKvmHost(poolAnswering({ pool: new LibvirtError(remote(INTERNAL_ERROR, 'pool lookup broke')) }), HOST, live());
    expect(r).toMatchObject({ ready: false, reason: 'DaemonError' });
    expect(r.message).toContain('pool lookup broke');
  });

  test('a failed version call fails the check even while the pool lookup answers', async () => {
    const r = await checkKvmHost(poolAnswering({ versionError: new ConnectionLostError('getLibVersion', false), pool: RUNNING }), HOST, live());
    expect(r).toMatchObject({ ready: false, reason: 'Unreachable' });
  });

  test('a lost connection is Unreachable with its own message', async () => {
    const lost = new ConnectionLostError('getHostname', false);
    const r = await checkKvmHost(poolAnswering({}, lost), HOST, live());
    expect(r).toMatchObject({ target: 'beelink', ready: false, reason: 'Unreachable', message: lost.message, details: { address: '10.0.0.5:2222' } });
    expect(r.details).not.toHaveProperty('hostname');
  });

  test('past the deadline the message says no answer came; a busy probe keeps its own message', async () => {
    const late = await checkKvmHost(poolAnswering({}, new Error('aborted')), HOST, aborted());
    expect(late).toMatchObject({ ready: false, reason: 'Timeout', message: 'no answer from beelink before the check deadline' });
    const busy = new ProbeBusyError('beelink');
    const r = await checkKvmHost(poolAnswering({}, busy), HOST, live());
    expect(r).toMatchObject({ ready: false, reason: 'Timeout', message: busy.message });
  });
});
