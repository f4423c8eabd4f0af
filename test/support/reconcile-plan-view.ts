import { expect } from 'vitest';
import type { NewEvent } from '../../src/events/event-sink.ts';
import type { Proxy, ProxyStatus } from '../../src/model/proxy-resource.ts';
import type { Instance } from '../../src/providers/lifecycle.ts';
import { instanceNameFor } from '../../src/proxies/instance-name.ts';
import type { ProbeFailed } from '../../src/proxies/readiness-plan.ts';
import { failure, type GoOn, type ReconcileOutcome, type StatusUpdate } from '../../src/proxies/reconcile-decisions.ts';
import type { deletionDone, movedAway, Probe, Start } from '../../src/proxies/reconcile-plan.ts';

/**
 * Proxies, instances and a user's view of the reconcile plan's decisions, for the table of
 * test/proxies/reconcile-plan.test.ts: what the plan says to do, the status a user then reads
 * (`egress get`), the events (`egress events`) and the outcome the job keeps.
 */

export const FLEET = 'test';
export const NOW = new Date('2026-03-01T12:00:00.000Z');
export const POLICY = { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 5 * 60_000 };
/** The configured providers; the plan only hands the lifecycle (here a name) back. */
export const LIFECYCLES: ReadonlyMap<string, string> = new Map([
  ['local', 'the local lifecycle'],
  ['kvm', 'the kvm lifecycle'],
]);

export interface Over {
  name?: string;
  spec?: Partial<Proxy['spec']>;
  metadata?: Partial<Proxy['metadata']>;
  status?: Partial<ProxyStatus>;
  specProblems?: string[];
}

/** A proxy `web` on the local provider, Pending at generation 2 unless `over` says otherwise. */
export function proxy(over: Over = {}): Proxy {
  return {
    name: over.name ?? 'web',
    labels: {},
    spec: { provider: 'local', ...over.spec },
    ...(over.specProblems ? { specProblems: over.specProblems } : {}),
    metadata: { uid: 'uid-1', generation: 2, createdAt: '2026-03-01T00:00:00.000Z', ...over.metadata },
    status: { phase: 'Pending', conditions: [], observedGeneration: 0, ...over.status },
  };
}

export const NAME = instanceNameFor(FLEET, proxy());
export const URL = 'http://127.0.0.1:8080';

/** The proxy Ready on instance i-1 on the local provider (Ready since 11:00). */
export function ready(status: Partial<ProxyStatus> = {}, over: Over = {}): Proxy {
  return proxy({
    ...over,
    status: {
      phase: 'Ready',
      instanceName: NAME,
      instanceId: 'i-1',
      instanceLocation: { provider: 'local' },
      url: URL,
      egressIp: '203.0.113.7',
      observedGeneration: 2,
      conditions: [{ type: 'Ready', status: 'True', reason: 'Ready', message: '', lastTransitionTime: '2026-03-01T11:00:00.000Z' }],
      ...status,
    },
  });
}

/** The Ready proxy with its spec now naming the kvm provider at placement beelink. */
export const moving = (over: Over = {}): Proxy => ready({}, { ...over, spec: { provider: 'kvm', placement: 'beelink' } });

export function instance(over: Partial<Instance> = {}): Instance {
  return {
    name: NAME,
    id: 'i-2',
    state: 'running',
    owner: { fleet: FLEET, proxy: 'web' },
    endpoint: { host: '127.0.0.1', port: 8080 },
    createdAt: NOW.toISOString(),
    ...over,
  };
}

/** Any decision of the plan; `write`/`no-write` stand for the location record (a status update or none). */
export type Decision =
  | Start<string>
  | GoOn
  | Probe
  | ProbeFailed
  | ReturnType<typeof deletionDone>
  | NonNullable<ReturnType<typeof movedAway>>
  | { kind: 'write'; status: StatusUpdate }
  | { kind: 'no-write' };

/** What a user sees of a decision: its kind, the outcome, the status after the write ('unchanged': none, or one that changes nothing), the events. */
export interface Seen {
  decision: string;
  outcome?: ReconcileOutcome;
  status?: Partial<ProxyStatus> | 'unchanged';
  events?: string[];
  [more: string]: unknown;
}

const line = (e: NewEvent): string => `${e.reason}: ${e.message}`;
const written = (update: StatusUpdate | undefined, stored: Proxy): Seen['status'] => (update && update(stored)) ?? 'unchanged';

/**
 * `given`: the proxy the reconcile read first; `stored`: the proxy as stored when the status is
 * written. A failure passes no redaction here (no secret is held), as with an executor without secrets.
 */
export function see(d: Decision, given: Proxy, stored: Proxy): Seen {
  switch (d.kind) {
    case 'fail':
      return { ...see(failure(given, d.message, d.patch), given, stored), decision: 'fail' };
    case 'finish':
      return { decision: d.kind, outcome: d.outcome, status: written(d.status, stored), events: d.events.map(line) };
    case 'delete':
      return { decision: d.kind, places: d.places };
    case 'provision':
      return { decision: d.kind, lifecycle: d.lifecycle, instanceName: d.target.instanceName };
    case 'go-on':
      return { decision: d.kind, events: d.events.map(line) };
    case 'probe':
      return { decision: d.kind, url: d.url, events: d.events.map(line) };
    case 'forget':
      return { decision: d.kind, outcome: d.outcome, events: d.events.map(line) };
    case 'moved-away':
      return { decision: d.kind, outcome: d.outcome, deleteInstance: d.deleteInstance };
    case 'probe-failed': {
      const events = [d.eviction?.event, d.replacement?.event].filter((e) => e !== undefined).map(line);
      return {
        decision: d.kind,
        outcome: d.outcome,
        status: written(d.status, stored),
        events,
        evicted: d.eviction?.cause,
        replaced: d.replacement?.instanceName,
      };
    }
    case 'write':
      return { decision: d.kind, status: written(d.status, stored) };
    case 'no-write':
      return { decision: d.kind };
  }
}

/** One row of a plan table: a branch, the proxy it starts from, the decision asked for, what a user then sees. */
export interface Row {
  branch: string;
  /** The proxy as the reconcile first read it (default: a Pending proxy). */
  given?: Proxy;
  /** The proxy as stored when the status is written (default: `given`). */
  stored?: Proxy;
  decide: (given: Proxy) => Decision;
  expected: Seen;
}

/** `expected` as toMatchObject reads it, except that a status field expected undefined must be absent (as `egress get` shows it). */
export function expectSeen(seen: Seen, expected: Seen): void {
  const { status, ...rest } = expected;
  expect(seen).toMatchObject(rest);
  if (status === undefined) return;
  if (status === 'unchanged') {
    expect(seen.status).toBe('unchanged');
    return;
  }
  expect(seen.status).toBeTypeOf('object');
  const shown = JSON.parse(JSON.stringify(seen.status)) as Record<string, unknown>;
  expect(shown).toMatchObject(Object.fromEntries(Object.entries(status).filter(([, v]) => v !== undefined)));
  for (const [key, value] of Object.entries(status)) if (value === undefined) expect(shown, `status.${key}`).not.toHaveProperty(key);
}
