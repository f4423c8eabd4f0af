/** The shapes of the API's answers the console reads (a subset of src/model and src/health). */

export interface TargetStatus {
  name: string;
  ready: boolean;
  reason: string;
  message: string;
  lastTransitionTime: string;
  lastCheckTime: string;
}

export interface ProviderHealth {
  name: string;
  status: { ready: boolean; lastTransitionTime: string; lastCheckTime: string; targets: TargetStatus[] };
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
}

export interface Proxy {
  name: string;
  labels: Record<string, string>;
  spec: { provider: string; placement?: string };
  metadata: { createdAt: string; deletionRequestedAt?: string; generation: number };
  status: { phase: string; egressIp?: string; conditions: Condition[]; lastError?: string; unreadySince?: string };
  proxyUrl?: string;
}

export interface Pool {
  name: string;
  spec: { replicas?: number };
  metadata: { createdAt: string; deletionRequestedAt?: string };
  status: { desired: number; current: number; ready: number; rotating: number; failed: number; conditions: Condition[]; lastError?: string };
}

export interface PoolMember {
  name: string;
  provider: string;
  placement?: string;
  phase: string;
  createdAt: string;
  deletionRequestedAt?: string;
  egressIp?: string;
  lastError?: string;
}

export interface PoolDetail extends Pool {
  members: { phases: Record<string, number>; items: PoolMember[] };
}

export interface EgressEvent {
  id: string;
  time: string;
  type: 'Normal' | 'Warning';
  reason: string;
  object: { kind: string; name: string };
  provider?: string;
  message: string;
  source: string;
  details?: Record<string, string | number | boolean | undefined>;
}

export interface JobView {
  queue: string;
  id: string;
  name: string;
  state: string;
  attemptsMade: number;
  failedReason?: string;
  createdAt: string;
  finishedAt?: string;
}

export interface Items<T> {
  items: T[];
}

/** `label=value` names of the pool a proxy belongs to. */
export const POOL_LABEL = 'egress-proxies.io/pool';

export interface UsageCost {
  instances: number;
  egress: number;
  vendor: number;
  ipv4: number;
  total: number;
}

export interface UsageTotals {
  bytesUp: number;
  bytesDown: number;
  requests: number;
  tunnels: number;
  instanceSeconds: number;
  instances: number;
  cost: UsageCost;
}

/** `GET /v1/usage` (src/usage/usage-store.ts). */
export interface UsageReport {
  from: string;
  to: string;
  groupBy: 'pool' | 'provider' | 'domain' | 'location' | 'machineType';
  currency: string | null;
  rows: (UsageTotals & { day: string; key: string })[];
  totals: UsageTotals;
}
