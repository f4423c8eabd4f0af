/** The per-process KVM host pool. */
export { HostPool } from './host-pool.ts';
export type { HostPoolOptions, HostPoolHostStats, PoolConnection, PoolFn, Dial } from './types.ts';
export { ProbeBusyError, ProbeReclaimedError, PoolClosedError, KvmAbortedError, callerAbortError } from './errors.ts';
export type { PoolMode } from './errors.ts';
export { createKvmPoolMetrics } from './metrics.ts';
export type { KvmPoolMetrics } from './metrics.ts';
export { Slot } from './slot.ts';
export { createKvmHostPool } from './kvm-host-pool.ts';
export type { KvmHostPool, KvmHostPoolOptions } from './kvm-host-pool.ts';
