import { findCause } from '../../errors.ts';
import { truncateMessage } from '../../health/message.ts';
import type { Reason } from '../../health/reasons.ts';
import type { TargetResult } from '../../health/types.ts';
import type { DialStage } from '../../kvm/dial.ts';
import { DialError } from '../../kvm/dial.ts';
import type { HostConnection } from '../../kvm/host-connection.ts';
import { ConnectionLostError, KeepaliveTimeoutError, LibvirtError, type StoragePoolInfo } from '../../kvm/libvirt/index.ts';
import { ProbeBusyError, type KvmHostPool } from '../../kvm/pool/index.ts';
import type { KvmHostConfig } from './config.ts';

const STAGE_REASON: Record<DialStage, Reason> = {
  'ssh-material': 'SSHMaterialUnavailable',
  tcp: 'Unreachable',
  'ssh-handshake': 'SSHHandshakeFailed',
  'libvirt-connect': 'LibvirtConnectFailed',
};

/** What one probe of a host learns. The pool's verdict is data here, never a thrown error. */
interface HostFacts {
  libVersion: number;
  hostname: string;
  pool: StoragePoolInfo | undefined;
}

function version(v: number): string {
  return `${Math.floor(v / 1_000_000)}.${Math.floor(v / 1000) % 1000}.${v % 1000}`;
}

function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

/** Maps a failed probe to a reason: dial stages, a busy probe, a daemon error reply. */
export function kvmFailureReason(err: unknown, signal: AbortSignal): Reason {
  if (signal.aborted) return 'Timeout';
  if (findCause(err, ProbeBusyError)) return 'Timeout';
  const dial = findCause(err, DialError);
  if (dial) return STAGE_REASON[dial.stage];
  if (findCause(err, ConnectionLostError) || findCause(err, KeepaliveTimeoutError)) return 'Unreachable';
  if (findCause(err, LibvirtError)) return 'DaemonError';
  return 'Error';
}

async function probeFacts(conn: HostConnection, poolName: string, signal: AbortSignal): Promise<HostFacts> {
  const libvirt = conn.libvirt;
  // Independent calls go out together (the client multiplexes them): two round trips, not four.
  const lookup = libvirt.storagePoolLookupByName(poolName, signal).then(
    (ref) => libvirt.storagePoolGetInfo(ref, signal),
    (err: unknown) => {
      // A missing pool is a verdict, decided after the probe returns: it must not look like a
      // failure of the connection.
      if (err instanceof LibvirtError && err.kind === 'not-found') return undefined;
      throw err;
    },
  );
  lookup.catch(() => undefined);
  const [libVersion, hostname] = await Promise.all([libvirt.getLibVersion(signal), libvirt.getHostname(signal)]);
  return { libVersion, hostname, pool: await lookup };
}

/**
 * Checks one KVM host over the pooled connection with `probe`, so a check never costs a
 * reconcile its connection: at the deadline the RPC is abandoned and the connection kept.
 * The daemon must answer (library version, hostname), and the configured pool must exist
 * and be running.
 */
export async function checkKvmHost(pool: KvmHostPool, host: KvmHostConfig, signal: AbortSignal): Promise<TargetResult> {
  const started = performance.now();
  const details: Record<string, string> = { address: `${host.address}:${host.port}`, user: host.user, pool: host.pool };
  const done = (ready: boolean, reason: Reason, message: string): TargetResult => ({
    target: host.name,
    ready,
    reason,
    message: truncateMessage(message),
    details,
    durationSeconds: (performance.now() - started) / 1000,
  });
  let facts: HostFacts;
  try {
    facts = await pool.probe(host, (conn, s) => probeFacts(conn, host.pool, s), signal);
  } catch (err) {
    const reason = kvmFailureReason(err, signal);
    const message = reason === 'Timeout' && !(err instanceof ProbeBusyError) ? `no answer from ${host.name} before the check deadline` : (err as Error).message;
    return done(false, reason, message);
  }
  details.libvirtVersion = version(facts.libVersion);
  details.hostname = facts.hostname;
  if (!facts.pool) return done(false, 'PoolNotFound', `storage pool "${host.pool}" not found on ${facts.hostname}`);
  details.poolState = facts.pool.stateWord;
  details.availableBytes = String(facts.pool.available);
  if (facts.pool.stateWord !== 'running') {
    return done(false, 'PoolInactive', `storage pool "${host.pool}" on ${facts.hostname} is ${facts.pool.stateWord}`);
  }
  return done(true, 'Ok', `libvirt ${details.libvirtVersion} on ${facts.hostname}, pool ${host.pool} running, ${gib(facts.pool.available)} free`);
}
