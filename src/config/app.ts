import type { ProviderConfig } from '../providers/config.ts';
import type { CheckSchedule } from './checks.ts';
import type { TelemetryConfig } from '../telemetry/config.ts';
import type { KubeConnectionConfig } from '../clients/kubernetes/kubeconfig.ts';
import type { PriceTable, UsageSettings } from './usage-config.ts';

/** Queues a worker can process. */
export const QUEUE_SET = ['checks', 'reconcile', 'gc'] as const;
export type WorkQueue = (typeof QUEUE_SET)[number];

export interface RedisSettings {
  /** One Redis server (`--redis-url`); undefined with `clusterNodes`, or for `egress up`'s own redis-server. */
  url: string | undefined;
  /** Seed nodes of a Redis Cluster (`--redis-cluster-nodes`); the rest are discovered. */
  clusterNodes?: readonly { host: string; port: number }[];
  /** From `--redis-password-file`: the password of the cluster nodes, or of a URL that carries none. Never logged. */
  password?: string;
  /** TLS to the cluster nodes (`--redis-tls`, or implied by `--redis-ca-file`); a standalone URL says so by `rediss://`. */
  clusterTls?: boolean;
  /** PEM CA certificates the server's certificate must chain to (`--redis-ca-file`); the system's when absent. */
  ca?: string;
  /** The hash-tagged key prefix shared by every queue and key (`{egress}`). */
  prefix: string;
  /**
   * How long Redis may stay unreachable before the process fails (`--redis-lost-after`, exit 1 with
   * `ERR_REDIS_LOST`, for its supervisor to restart it); 0 waits for ever. The flag's default (5m) is
   * the one default; a configuration not built from flags (tests, embedding) without it waits for ever.
   */
  lostAfterMs?: number;
}

export interface ApiSettings {
  host: string;
  port: number;
  /** Bearer tokens accepted by the API; empty means no auth (only allowed on loopback). */
  tokens: readonly string[];
  /**
   * The name of each token, by position (`name:token` lines of the token file; `#N` for a line
   * without one). Shown in events as who acted; absent: every token is shown as `#N`.
   */
  tokenNames?: readonly string[];
  /** Largest request body accepted (`--max-body-size`); larger ones are answered 413. */
  maxBodyBytes: number;
  /** `--max-connections`: sockets the API holds at once (capped further by the open-files limit; connection-limits.ts); absent: 1024. */
  maxConnections?: number;
  /** `--max-connections-per-peer`: of those, what one client address may hold outside the reserve; absent: 256. */
  maxConnectionsPerPeer?: number;
  /**
   * Extra `Host` names (`name` or `name:port`, `--allowed-host`) served while the API has no
   * tokens; the bound address and `localhost` are always allowed.
   */
  allowedHosts: readonly string[];
  /**
   * Set when the API has neither `--api-token-file` nor `--no-auth`: the data directory's token
   * file, made (or read) at start (src/cli/local-api-access.ts), whose token the API then requires.
   * The Host allow list stays on with it, as without tokens (the API is on loopback).
   */
  localTokenFile?: string;
  /** `--no-auth`: no token on a loopback API, by choice (warned at start). */
  noAuth?: boolean;
  /** `--allow-open-token-file`: a token file others can read is used, with `tokenFileWarning` logged. */
  allowOpenTokenFile?: boolean;
  tokenFileWarning?: string;
  /** Keep the Host allow list on although there are tokens (the local token of a loopback API). */
  hostCheck?: boolean;
}

export interface WorkerSettings {
  queues: readonly WorkQueue[];
  concurrency: number;
  /** BullMQ lock duration; a crashed worker's job is taken over after about this long. */
  lockDurationMs: number;
  stalledIntervalMs: number;
}

/** Readiness probing of proxies (`--probe-*`, `--replace-after`). */
export interface ReadinessSettings {
  /** Failed probes in a row that take a Ready proxy out of discovery (default 1: the first). */
  failureThreshold: number;
  /** Passed probes in a row that bring an evicted proxy back (default 2). */
  successThreshold: number;
  /** A proxy unready this long has its instance replaced. */
  replaceAfterMs: number;
  /** How often each Ready proxy is probed, apart from the resync (jittered ±10 %); 0 = only on the resync. */
  intervalMs: number;
  /** Deadline of each step of a probe (the TCP connect, the request through the proxy). */
  timeoutMs: number;
}

/** The whole configuration of a process: parsed once at start, validated, frozen, passed down. */
/** How long and how many events a fleet keeps (`--events-max-age`, `--events-max-count`). */
export interface EventRetention {
  maxCount: number;
  maxAgeMs: number;
}

/**
 * Where ProviderHealth and Proxy objects live (`--store`): Redis (standalone), or Kubernetes custom
 * resources (docs/kubernetes-store.md). The queues are in Redis either way.
 */
export type StoreSettings =
  | { kind: 'redis' }
  | {
      kind: 'kubernetes';
      /** How to reach the API server, as the kubernetes provider reads it. */
      connection: KubeConnectionConfig;
      /** The namespace of the Proxy objects and their credential Secrets. */
      namespace: string;
    };

/**
 * Picking from pools and ban feedback (`--pick-*`, `--feedback-*`; docs/crawlers.md). Absent:
 * the defaults of `DEFAULT_PICK_SETTINGS` (configurations built before pools existed).
 */
export interface PickSettings {
  /** A session not picked for this long is forgotten (`--pick-session-ttl`); each pick renews it. */
  sessionTtlMs: number;
  /** How long an API process keeps a pool's Ready members before listing again (`--pick-cache`): the staleness bound of picks. */
  memberCacheMs: number;
  /** A member reported blocked (or captcha) for a domain is not picked for that domain for this long (`--feedback-block-cooldown`). */
  blockCooldownMs: number;
  /** A member blocked on this many distinct domains within `replaceWindowMs` is replaced (`--feedback-replace-domains`). */
  replaceDomains: number;
  /** The window of the replacement rule (`--feedback-replace-window`). */
  replaceWindowMs: number;
  /** Feedback reports per second per token (`--feedback-rate`), refilled continuously. */
  feedbackRate: number;
  /** Reports a token may send at once above the rate (`--feedback-burst`). */
  feedbackBurst: number;
}

export const DEFAULT_PICK_SETTINGS: PickSettings = Object.freeze({
  sessionTtlMs: 30 * 60_000,
  memberCacheMs: 1000,
  blockCooldownMs: 30 * 60_000,
  replaceDomains: 3,
  replaceWindowMs: 10 * 60_000,
  feedbackRate: 20,
  feedbackBurst: 100,
});

export interface AppConfig {
  providers: readonly ProviderConfig[];
  /** Absent: Redis (configurations built before `--store` existed). */
  store?: StoreSettings;
  checks: CheckSchedule;
  redis: RedisSettings;
  api: ApiSettings;
  /** Port of a /metrics listener for roles without the API (on api.host, with api.tokens); undefined: none. */
  metricsPort: number | undefined;
  worker: WorkerSettings;
  dataDir: string;
  logLevel: string;
  /** How long a role waits for running jobs at shutdown before aborting them. */
  shutdownGraceMs: number;
  /** Scheduler lease length; a standby takes over at most this long after the leader dies. */
  leaseMs: number;
  /** Retry backoff base for jobs. */
  backoffMs: number;
  /** Where readiness probes send their request through a proxy (`GET /v1/echo` of the API); undefined: this process's API, or 127.0.0.1 on --port. */
  echoUrl: string | undefined;
  /** How often each provider is swept for orphaned instances; 0 = never. */
  gcIntervalMs: number;
  /** Instances younger than this are never garbage-collected. */
  gcGraceMs: number;
  /** Instance deletions a GC sweep starts per second on a provider whose `gc.deletesPerSecond` does not say (`--gc-deletes-per-second`). */
  gcDeletesPerSecond: number;
  /** How often every proxy is reconciled (and its readiness re-probed) even without a change; 0 = never. */
  resyncMs: number;
  readiness: ReadinessSettings;
  /** How soon a proxy still starting or being deleted is looked at again. */
  recheckMs: number;
  /** Completed and failed job retention. */
  retention: { completed: number; failed: number };
  /** How many events, and how old, the fleet's event stream keeps (`--events-max-count`, `--events-max-age`). */
  events: EventRetention;
  /** Picks and ban feedback; absent: DEFAULT_PICK_SETTINGS. */
  picks?: PickSettings;
  /** The configuration file's price table (docs/usage.md); absent: usage is counted, every cost is 0. */
  prices?: PriceTable | undefined;
  /** What usage accounting keeps (the file's `usage:`); absent: DEFAULT_USAGE_SETTINGS. */
  usage?: UsageSettings | undefined;
  /** Tracing (OTLP export), from the standard OTEL_* variables; absent: off, and no SDK is loaded. */
  telemetry?: TelemetryConfig | undefined;
}

/** Deep-freezes a configuration object so that nothing below the entry point can change it. */
export function freezeConfig<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value as Record<string, unknown>)) freezeConfig(inner);
  }
  return value;
}

/** The GC delete rate of a provider: its own `gc.deletesPerSecond`, else `--gc-deletes-per-second`. */
export function gcDeletesPerSecond(config: Pick<AppConfig, 'providers' | 'gcDeletesPerSecond'>, provider: string): number {
  return config.providers.find((p) => p.name === provider)?.gc?.deletesPerSecond ?? config.gcDeletesPerSecond;
}
