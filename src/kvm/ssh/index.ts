/** SSH transport of the KVM provider: material, known_hosts, connect, streamlocal channels. */
export {
  connectSsh,
  connectTcp,
  SshHandshakeClosedError,
  TcpConnectTimeoutError,
  DEFAULT_SSH_KEEPALIVE_INTERVAL_MS,
  DEFAULT_SSH_MAX_UNWRITTEN_BYTES,
} from './connect.ts';
export type { SshTarget, SshConnectOptions } from './connect.ts';
export { loadSshMaterial, SshMaterialError } from './material.ts';
export type { SshMaterial, SshMaterialSource } from './material.ts';
export { SshSession, SshClosedError, SshPeerNotReadingError } from './session.ts';
export type { SshWriteBound } from './session.ts';
export { openStreamLocal } from './streamlocal.ts';
export { parseKnownHosts, verifyHostKey, knownHostsName, entryMatchesHost, fingerprint, hostKeyAlgorithmsFor } from './known-hosts.ts';
export type { KnownHostEntry, HostKeyVerdict } from './known-hosts.ts';
