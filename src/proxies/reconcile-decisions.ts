import type { NewEvent } from '../events/event-sink.ts';
import * as ev from '../events/proxy-events.ts';
import type { InstanceLocation, Proxy, ProxyStatus } from '../model/proxy-resource.ts';
import { instanceNameFor } from './instance-name.ts';
import { locationOf, sameLocation } from './location.ts';

/**
 * The vocabulary of a reconcile's decisions (reconcile-plan.ts, readiness-plan.ts), as data the
 * executor (reconcile.ts) carries out: how a reconcile ends, goes on, writes the status.
 */

/**
 * What a reconcile concluded. `retry-later` means "look again soon" (an instance still
 * starting or still being deleted): the caller schedules the next look, it is not an error.
 */
export type ReconcileOutcome =
  { kind: 'gone' } | { kind: 'deleted' } | { kind: 'ready'; url: string } | { kind: 'failed'; message: string } | { kind: 'retry-later'; why: string };

/** A status write: the next status from the proxy as stored when it is written (undefined: leave it). */
export type StatusUpdate = (current: Proxy) => ProxyStatus | undefined;

/** The reconcile ends: write `status` (when there is one), record `events`, return `outcome`. */
export interface Finish {
  kind: 'finish';
  status?: StatusUpdate;
  events: NewEvent[];
  outcome: ReconcileOutcome;
}
/** The reconcile ends Failed for this generation with `message` (see `failure`); `patch`, the instance it concerns. */
export interface Fail {
  kind: 'fail';
  message: string;
  patch: Partial<ProxyStatus>;
}
/** The reconcile carries on after recording `events` (what just happened). */
export interface GoOn {
  kind: 'go-on';
  events: NewEvent[];
}
/** Whether the instance left a place, as the executor found. */
export type Removal = { kind: 'removed' } | { kind: 'pending' } | { kind: 'unreachable'; why: string };

/** The proxy's instance: its name, where the spec wants it (`here`), where it was recorded, and where it moves from. */
export interface Target {
  instanceName: string;
  here: InstanceLocation;
  recorded: InstanceLocation | undefined;
  /** The recorded place when the spec now names another (a move). */
  moveFrom: InstanceLocation | undefined;
}

export function targetOf(proxy: Proxy, fleet: string): Target {
  const here = locationOf(proxy);
  const recorded = proxy.status.instanceLocation;
  const moveFrom = recorded !== undefined && !sameLocation(recorded, here) ? recorded : undefined;
  return { instanceName: instanceNameFor(fleet, proxy), here, recorded, moveFrom };
}

/** The end of every failure branch, from its `message` as redacted by the caller: Failed (with `patch`), a Failed event, the outcome. */
export function failure(proxy: Proxy, message: string, patch: Partial<ProxyStatus>): Finish {
  return finish({ kind: 'failed', message }, (p) => withPatch(p, { ...patch, phase: 'Failed', lastError: message }), [ev.failed(proxy, message)]);
}

export function finish(outcome: ReconcileOutcome, update?: StatusUpdate, events: NewEvent[] = []): Finish {
  return update ? { kind: 'finish', status: update, events, outcome } : { kind: 'finish', events, outcome };
}

export function goOn(events: NewEvent[]): GoOn {
  return { kind: 'go-on', events };
}

/** `patch` over the status, for the generation the proxy is at. */
export function withPatch(proxy: Proxy, patch: Partial<ProxyStatus>): ProxyStatus {
  return { ...proxy.status, ...patch, observedGeneration: proxy.metadata.generation };
}
