/**
 * Events: what happened and why, one record per lifecycle decision (a proxy applied, an instance
 * created or deleted and for what reason, a readiness flip, a check reason flip, a GC sweep, a
 * change of scheduler leader). A port, like the stores: the decision points record through an
 * EventSink and never see where events go. Today that is a Redis stream per fleet; a Kubernetes
 * mode adds a sink that also writes Kubernetes Events on the object (`teeEvents`).
 *
 * Rules every sink keeps: `record` never throws and never blocks the decision it describes (a
 * failed write is logged, the work goes on); no event carries a secret: messages and details
 * are built from names, reasons and counts, never from credentials, tokens or URLs with them.
 */
import { MAX_MESSAGE, truncateMessage } from '../health/message.ts';
import { NO_REDACTION, type Redactor } from '../secrets/secret-registry.ts';

export const EVENT_TYPES = ['Normal', 'Warning'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The kinds of object an event is about (kubectl's involvedObject). */
export const EVENT_KINDS = ['Proxy', 'ProviderHealth', 'Scheduler', 'ProxyPool'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** Stable reasons, each documented in docs/operations.md. */
export const EVENT_REASONS = [
  // Proxy, from the API
  'Applied',
  'DeletionRequested',
  // Proxy, from reconcile
  'InstanceCreated',
  'InstanceStarted',
  'InstanceDeleted',
  'Ready',
  'NotReady',
  'Failed',
  'Deleted',
  // ProxyPool, from the pool reconcile (Applied, DeletionRequested and Deleted apply to pools too)
  'MemberCreated',
  'MemberDeleted',
  // ProxyPool, budgets and the autoscaler (docs/usage.md)
  'BudgetNearlySpent',
  'BudgetExhausted',
  'ScaledUp',
  'ScaledDown',
  // Proxy, from ban feedback (a pool member blocked for a domain; its replacement asked of the pool)
  'Blocked',
  'ReplacementRequested',
  // ProviderHealth, from the publisher and the GC
  'CheckReasonChanged',
  'GcSweep',
  'GcRefused',
  // Scheduler
  'LeaderElected',
  'LeaderLost',
] as const;
export type EventReason = (typeof EVENT_REASONS)[number];

/** Why an instance was created or deleted. */
export type InstanceCause = 'apply' | 'replace' | 'move' | 'delete' | 'recreate' | 'gc-orphan';

export type EventDetails = Readonly<Record<string, string | number | boolean>>;

/** An event as stored and served. */
export interface EgressEvent {
  /** Position in the fleet's stream (`<ms>-<seq>`); also the cursor of `since`. */
  id: string;
  /** When it was recorded (the stream entry's time). */
  time: string;
  type: EventType;
  reason: EventReason;
  object: { kind: EventKind; name: string };
  /** The provider the event concerns, when one does. */
  provider?: string;
  message: string;
  /** The role that recorded it: api, worker, publisher or scheduler. */
  source: string;
  details?: EventDetails;
}

/** What a decision point records; the sink gives it its id and time. */
export type NewEvent = Omit<EgressEvent, 'id' | 'time' | 'source'>;

export interface EventSink {
  /** Records an event. Never throws; the write may still be in flight when it returns. */
  record(event: NewEvent): void;
}

/** Which events a read returns. Every field narrows; `since` is exclusive when it is an event id. */
export interface EventQuery {
  proxy?: string;
  provider?: string;
  type?: EventType;
  reason?: EventReason;
  kind?: EventKind;
  /** Events after this id (a cursor), or at or after this time (epoch ms). */
  since?: { id: string } | { timeMs: number };
  /** At most this many. With `since`: the oldest that match (a watch moves forward); without: the newest. */
  limit: number;
}

export interface EventReader {
  /** Matching events, oldest first. */
  list(query: EventQuery, signal?: AbortSignal): Promise<EgressEvent[]>;
}

export interface EventStore extends EventReader {
  /** A sink whose events name `source` (the role recording them) as their source. */
  sink(source: string): EventSink;
  /** Waits for the writes in flight; the connection belongs to the caller. */
  close(): Promise<void>;
}

/** How long and how many events a fleet keeps: a setting of the application config. */
export type { EventRetention } from '../config/app.ts';

/**
 * The event as a store keeps it: its message and string details passed through the one redaction
 * (a message may quote a peer's error text, and peers quote the requests they refused: passwords,
 * tokens), then the message cut to MAX_MESSAGE characters (a peer's text has no length of its own; a
 * 4 MiB daemon error was stored whole). Redacted first, so a cut never leaves half a secret.
 */
export function storedEvent<E extends NewEvent>(event: E, redactor: Redactor = NO_REDACTION): E {
  const message = truncateMessage(redactor.redact(event.message), MAX_MESSAGE);
  const details = event.details && redactedDetails(event.details, redactor);
  if (message === event.message && details === event.details) return event;
  return { ...event, message, ...(details ? { details } : {}) };
}

function redactedDetails(details: EventDetails, redactor: Redactor): EventDetails {
  let changed = false;
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(details)) {
    const clean = typeof v === 'string' ? redactor.redact(v) : v;
    if (clean !== v) changed = true;
    out[k] = clean;
  }
  return changed ? out : details;
}

/** The sink of a caller that has none: records nothing. */
export const noEvents: EventSink = Object.freeze({ record: () => undefined });

/** A sink that records into several (the Redis stream and, in Kubernetes mode, Kubernetes Events). */
export function teeEvents(...sinks: readonly EventSink[]): EventSink {
  return { record: (event) => sinks.forEach((s) => s.record(event)) };
}

/** Whether `event` passes every filter of `query` but `since` and `limit`. */
export function matchesQuery(event: EgressEvent, query: EventQuery): boolean {
  if (query.proxy !== undefined && !(event.object.kind === 'Proxy' && event.object.name === query.proxy)) return false;
  if (query.provider !== undefined && event.provider !== query.provider) return false;
  if (query.type !== undefined && event.type !== query.type) return false;
  if (query.reason !== undefined && event.reason !== query.reason) return false;
  if (query.kind !== undefined && event.object.kind !== query.kind) return false;
  return true;
}

/** `<ms>-<seq>` → [ms, seq], for ordering ids of the memory store as Redis orders them. */
export function parseEventId(id: string): [number, number] | undefined {
  const m = /^(\d{1,15})-(\d{1,15})$/.exec(id);
  if (!m) return undefined;
  return [Number(m[1]), Number(m[2])];
}
