import { withReadyCondition } from '../proxies/conditions.ts';
import { afterFailure, readySeconds } from '../proxies/eviction.ts';
import type { EvictionCause, ReadinessHooks, ReadinessRules } from '../proxies/readiness-contract.ts';
import type { ProxyStatusWriter } from '../store/proxy-store.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import { becameNotReady } from '../events/proxy-events.ts';

export interface FailureDeps {
  proxies: ProxyStatusWriter;
  rules: ReadinessRules;
  hooks: ReadinessHooks;
  /** Asks for a reconcile of the proxy (deduplicated per proxy). */
  requestReconcile: (proxy: string) => Promise<void>;
  now?: () => Date;
}

export interface Failure {
  cause: EvictionCause;
  message: string;
  /** The instance the failure is about: a proxy since moved to another URL or instance is left alone. */
  url?: string;
  instanceId?: string;
  /** Evict at once, whatever `--probe-failures` says (the provider saw the process exit). */
  immediate?: boolean;
}

export type FailureOutcome = 'evicted' | 'counted' | 'ignored';

/**
 * Records a failure of a Ready proxy seen outside reconcile (the probe loop, the provider's exit
 * watch) in one compare-and-set of its status: counted, or out of discovery once the rule says so.
 * An evicted proxy gets a reconcile at once, which recreates a dead instance and probes it back.
 * A proxy that is not Ready, being deleted, or now on another URL or instance is left alone.
 */
export async function recordFailure(deps: FailureDeps, name: string, failure: Failure, signal?: AbortSignal): Promise<FailureOutcome> {
  const now = (deps.now ?? (() => new Date()))();
  let outcome = 'ignored' as FailureOutcome;
  let provider = '';
  let ready: number | undefined;
  let subject: Proxy | undefined;
  await deps.proxies.updateStatus(
    name,
    (p) => {
      outcome = 'ignored';
      if (p.metadata.deletionRequestedAt || p.status.phase !== 'Ready') return undefined;
      if (failure.url !== undefined && p.status.url !== failure.url) return undefined;
      if (failure.instanceId !== undefined && p.status.instanceId !== failure.instanceId) return undefined;
      const next = afterFailure(p.status, failure.message, deps.rules, now, failure.immediate === true);
      outcome = next.evicted ? 'evicted' : 'counted';
      provider = p.spec.provider;
      subject = p;
      ready = readySeconds(p.status, now);
      return withReadyCondition(next.status, now, deps.hooks.secrets);
    },
    signal,
  );
  if (outcome === 'evicted') {
    deps.hooks.onEvicted?.(provider, failure.cause, ready);
    if (subject) deps.hooks.events?.record(becameNotReady(subject, failure.cause, failure.message));
    await deps.requestReconcile(name);
  }
  return outcome;
}
