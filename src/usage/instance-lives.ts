/*
 * Instance lives as the usage store keeps them, and the rules that make recording them idempotent
 * (the lifecycle's events may repeat, and may arrive out of order). The memory store applies these
 * functions; the Redis store's scripts (usage-scripts.ts) apply the same rules in one step, and the
 * conformance suite (test/usage/usage-store.test.ts) holds both to them.
 *
 * - A start for an instance whose current life is open, or ended after that start, is a repeat: nothing changes.
 * - A start at or after the current life's end is a new life (a move deletes and creates the same
 *   name, possibly within one millisecond; a provider may reuse a name). An instance recreated after it
 *   vanished without a delete (`recreate`) continues its open life.
 * - An end of an open life at or after its start ends it; a later end of an ended life is a repeat.
 * - An end with no life (its start not seen yet, or lost) is kept as a *pending end*; a start at or
 *   before it completes that life. A pending end counts no seconds: nobody knows when it began.
 */
import type { InstanceRecord } from './usage-types.ts';
import { recordTimeMs } from './usage-window.ts';

/** One life as stored: the record's fields with times as epoch milliseconds (absent start: a pending end). */
export interface StoredLife {
  instance: string;
  provider: string;
  proxy?: string;
  pool?: string;
  location?: string;
  machineType?: string;
  startMs?: number;
  endMs?: number;
}

/** The key of an instance (provider-side names are unique within a provider). */
export function instanceKey(provider: string, instance: string): string {
  return `${provider}/${instance}`;
}

/** The id a new life is stored under: its instance and when it began (or, pending, ended). */
export function lifeId(life: StoredLife): string {
  return `${instanceKey(life.provider, life.instance)}@${life.startMs ?? `end-${life.endMs ?? 0}`}`;
}

export function storedLife(record: InstanceRecord): StoredLife {
  const life: StoredLife = {
    instance: record.instance,
    provider: record.provider,
    proxy: record.proxy,
    location: record.location,
    machineType: record.machineType,
    startMs: recordTimeMs(`instance ${record.instance}: startedAt`, record.startedAt),
  };
  if (record.pool !== undefined) life.pool = record.pool;
  if (record.endedAt !== undefined) life.endMs = recordTimeMs(`instance ${record.instance}: endedAt`, record.endedAt);
  return life;
}

/** A complete life as the shared record; undefined for a pending end. */
export function lifeRecord(life: StoredLife): InstanceRecord | undefined {
  if (life.startMs === undefined) return undefined;
  return {
    instance: life.instance,
    proxy: life.proxy ?? '',
    ...(life.pool !== undefined ? { pool: life.pool } : {}),
    provider: life.provider,
    location: life.location ?? '',
    machineType: life.machineType ?? '',
    startedAt: new Date(life.startMs).toISOString(),
    ...(life.endMs !== undefined ? { endedAt: new Date(life.endMs).toISOString() } : {}),
  };
}

/** What a start or an end does to an instance's current life: nothing, replace it, or begin a new one. */
export type LifeChange = { kind: 'none' } | { kind: 'update'; life: StoredLife } | { kind: 'new'; life: StoredLife };

export function onStart(current: StoredLife | undefined, started: StoredLife): LifeChange {
  const startMs = started.startMs ?? 0;
  if (current) {
    if (current.startMs === undefined) {
      if (current.endMs !== undefined && current.endMs >= startMs) return { kind: 'update', life: { ...started, endMs: current.endMs } };
    } else if (current.endMs === undefined || startMs < current.endMs) return { kind: 'none' };
  }
  const { endMs: _ignored, ...open } = started;
  return { kind: 'new', life: open };
}

export function onEnd(current: StoredLife | undefined, provider: string, instance: string, endMs: number): LifeChange {
  if (current) {
    if (current.endMs !== undefined) return { kind: 'none' };
    if (current.startMs !== undefined && endMs >= current.startMs) return { kind: 'update', life: { ...current, endMs } };
    return { kind: 'none' };
  }
  return { kind: 'new', life: { instance, provider, endMs } };
}

/** Seconds of `life` within [fromMs, toMs); an open life runs to `nowMs`; a pending end has none. */
export function lifeSecondsWithin(life: StoredLife, fromMs: number, toMs: number, nowMs: number): number {
  if (life.startMs === undefined) return 0;
  const end = life.endMs ?? Math.max(nowMs, life.startMs);
  return Math.max(0, Math.min(end, toMs) - Math.max(life.startMs, fromMs)) / 1000;
}
