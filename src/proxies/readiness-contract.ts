import type { EventSink } from '../events/event-sink.ts';
import type { ProxyCredentials } from '../model/proxy-credentials.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { Secrets } from '../secrets/secret-registry.ts';

/**
 * The readiness contract: what a readiness probe answers, the rules and policy that act on its
 * answers, and the hooks that observe them. Shared by reconcile (src/proxies), the probe loop and
 * the exit watch (src/readiness, workers/); it imports nothing of either, so neither reaches into
 * the other for it.
 */

/**
 * Why a probe failed: a step ran past its deadline (`timeout`: a hung or paused proxy), the proxy
 * refused the connection (`refused`: nothing listens), or anything else (`error`: a 407, a 5xx,
 * a reset, a wrong answer).
 */
export type ProbeFailureCause = 'timeout' | 'refused' | 'error';

/**
 * Why a Ready proxy left discovery: a probe step ran past `--probe-timeout` (`timeout`), the
 * proxy refused the connection (`refused`), a probe failed otherwise (`probe-failed`: a 407, a
 * 5xx, a wrong answer), or its provider saw the instance's process exit (`process-exited`).
 */
export const EVICTION_CAUSES = ['timeout', 'refused', 'probe-failed', 'process-exited'] as const;
export type EvictionCause = (typeof EVICTION_CAUSES)[number];

/** The eviction cause a failed probe gives. */
export function evictionCauseOf(probeCause: ProbeFailureCause): EvictionCause {
  return probeCause === 'error' ? 'probe-failed' : probeCause;
}

export type ProbeVerdict =
  { ok: true; egressIp: string; durationSeconds?: number } | { ok: false; cause: ProbeFailureCause; message: string; durationSeconds?: number };

/** Probes the proxy at `endpoint`; `credentials` when the caller already holds them (else read from the store). */
export type ReadinessProbe = (
  endpoint: { host: string; port: number },
  proxy: Proxy,
  signal: AbortSignal,
  credentials?: ProxyCredentials,
) => Promise<ProbeVerdict>;

export interface ReadinessRules {
  /** Failed probes in a row that take a Ready proxy out of discovery. */
  failureThreshold: number;
  /** Passed probes in a row that bring back a proxy whose probes failed (same instance). */
  successThreshold: number;
}

export interface ReadinessPolicy extends ReadinessRules {
  /** A proxy unready this long has its instance replaced (deleted, then made again). */
  replaceAfterMs: number;
}

/** The policy of a reconcile given none: out at the first failure, back after two passes, replaced after five minutes unready. */
export const DEFAULT_READINESS: ReadinessPolicy = { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 5 * 60_000 };

/** Observability hooks of readiness, shared by reconcile, the probe loop and the exit watch. */
export interface ReadinessHooks {
  onProbe?: (provider: string, ok: boolean, durationSeconds?: number) => void;
  /** A Ready proxy left discovery; `readySeconds`, how long it had been Ready (when known). */
  onEvicted?: (provider: string, cause: EvictionCause, readySeconds: number | undefined) => void;
  onReplace?: (provider: string) => void;
  /** A look at a proxy abandoned for want of this process's own resources (`where`: probe; `code`: EMFILE, ENFILE, ENOMEM). */
  onObserverError?: (where: string, code: string) => void;
  /** Where lifecycle decisions are recorded (instance created, started, deleted; readiness flips). */
  events?: EventSink;
  /**
   * The process's secret registry (src/secrets): every status write passes its redaction (a peer's
   * error quotes what it was sent), and reconcile tells it each proxy's credentials as it reads them
   * and forgets them with the proxy. Absent: nothing is redacted (tests that hold no secret).
   */
  secrets?: Secrets;
}
