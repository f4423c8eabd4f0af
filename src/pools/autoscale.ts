import type { AutoscaleStatus, PoolAutoscale } from '../model/pool-resource.ts';
import { formatDuration, parseDuration } from '../schema/duration.ts';

/*
 * The autoscaler of a pool (pure): from the pool's pick counter and its own previous state, the
 * member count it asks for. reconcile-pool.ts reads the counter (pick-demand.ts) and writes the
 * state into the pool's status, where any worker goes on from it.
 */

/** The smoothing of the pick rate: an exponentially weighted mean with this time constant. */
export const RATE_SMOOTHING_MS = 60_000;
/** How long a lower count must hold before members go, when the spec does not say. */
export const DEFAULT_SCALE_DOWN_DELAY_MS = 5 * 60_000;
/** An autoscaled pool is looked at again at least this often (sooner when idleAfter or the delay are shorter). */
export const AUTOSCALE_LOOK_MS = 10_000;

/** The pool's pick counter as read from Redis, with Redis's clock. */
export interface DemandReading {
  /** Picks counted since the counter began (it may restart from 0 when its key expired). */
  picks: number;
  /** The last pick (epoch ms), if any is on record. */
  lastPickMs?: number;
  /** Redis's clock at the read. */
  nowMs: number;
}

export interface AutoscaleInput {
  spec: PoolAutoscale;
  /** `spec.replicas`: where the autoscaler starts. */
  startReplicas?: number | undefined;
  previous: AutoscaleStatus | undefined;
  demand: DemandReading;
  /** The budget is spent: no more members than this (those there are). */
  capAt?: number | undefined;
}

export interface AutoscaleDecision {
  state: AutoscaleStatus;
  /** Set when the count moved this pass. */
  scaled?: { from: number; to: number; why: string };
}

export function scaleDownDelayMs(spec: PoolAutoscale): number {
  return spec.scaleDownDelay === undefined ? DEFAULT_SCALE_DOWN_DELAY_MS : (parseDuration(spec.scaleDownDelay) ?? DEFAULT_SCALE_DOWN_DELAY_MS);
}

/** How soon an autoscaled pool is looked at again: every 10 s, or half its idleAfter or scaleDownDelay when shorter (at least 1 s). */
export function autoscaleLookMs(spec: PoolAutoscale): number {
  const idle = parseDuration(spec.idleAfter) ?? AUTOSCALE_LOOK_MS;
  const delay = scaleDownDelayMs(spec);
  return Math.max(1000, Math.min(AUTOSCALE_LOOK_MS, idle / 2, delay > 0 ? delay / 2 : AUTOSCALE_LOOK_MS));
}

/**
 * The count to ask for: ceil(smoothed rate / picksPerMember) within [minReplicas, maxReplicas], at
 * least 1 while a pick came within idleAfter; minReplicas once none came for idleAfter (at once). A
 * higher count applies at once; a lower one only once it has held for scaleDownDelay. `capAt` (the
 * budget is spent) keeps the count from growing past the members there are.
 */
export function decideReplicas(input: AutoscaleInput): AutoscaleDecision {
  const { spec, previous, demand } = input;
  const clamp = (n: number): number => Math.min(spec.maxReplicas, Math.max(spec.minReplicas, n));
  const now = demand.nowMs;
  // A changed min/max applies at once: the count starts from within them.
  const from = clamp(previous?.desired ?? input.startReplicas ?? spec.minReplicas);
  const rate = smoothedRate(previous, demand);
  const lastPickMs = Math.max(demand.lastPickMs ?? 0, previous?.lastPickAt ? Date.parse(previous.lastPickAt) : 0);
  const startedMs = previous?.startedAt ? Date.parse(previous.startedAt) : previous ? 0 : now;
  const idleMs = parseDuration(spec.idleAfter) ?? 0;
  // Before any pick, idleAfter counts from when the autoscaler began: a new pool idles only after it.
  const idle = now - Math.max(lastPickMs, startedMs) >= idleMs;
  const picked = lastPickMs > 0 && now - lastPickMs < idleMs;
  let target: number;
  let why: string;
  if (idle) {
    target = spec.minReplicas;
    why = `no pick for ${formatDuration(idleMs)}`;
  } else {
    const wanted = Math.ceil(rate / spec.picksPerMember - 1e-9);
    // A pick within idleAfter wants a member at least: the first pick of an empty pool wakes it.
    target = clamp(picked ? Math.max(1, wanted) : wanted);
    why = `${rate.toFixed(1)} picks/min at ${spec.picksPerMember} per member`;
  }
  if (input.capAt !== undefined && target > input.capAt) {
    target = input.capAt;
    why = `${why}; capped at ${target} by the budget`;
  }
  const base = {
    rate: Math.round(rate * 1000) / 1000,
    picks: demand.picks,
    readAt: new Date(now).toISOString(),
    ...(startedMs > 0 ? { startedAt: new Date(startedMs).toISOString() } : {}),
    ...(lastPickMs > 0 ? { lastPickAt: new Date(lastPickMs).toISOString() } : {}),
  };
  if (target >= from || idle) {
    const state: AutoscaleStatus = { desired: target, reason: why, ...base };
    return target === from ? { state } : { state, scaled: { from, to: target, why } };
  }
  // Lower: only once it has held for scaleDownDelay.
  const since = previous?.lowerSince ? Date.parse(previous.lowerSince) : now;
  const delay = scaleDownDelayMs(spec);
  if (now - since >= delay) {
    const reason = `${why}, held for ${formatDuration(delay)}`;
    return { state: { desired: target, reason, ...base }, scaled: { from, to: target, why: reason } };
  }
  const reason = `${why}: ${target} wanted, waiting for scaleDownDelay (${formatDuration(delay)})`;
  return { state: { desired: from, reason, ...base, lowerSince: new Date(since).toISOString() } };
}

/** The pick rate per minute: an exponentially weighted mean of each interval's rate (0 on the first read). */
function smoothedRate(previous: AutoscaleStatus | undefined, demand: DemandReading): number {
  if (!previous) return 0;
  const interval = demand.nowMs - Date.parse(previous.readAt);
  if (!(interval > 0)) return previous.rate;
  // A counter that went back (its key expired and began again) counts from 0.
  const picks = demand.picks >= previous.picks ? demand.picks - previous.picks : demand.picks;
  const instant = (picks / interval) * 60_000;
  const alpha = 1 - Math.exp(-interval / RATE_SMOOTHING_MS);
  return previous.rate + alpha * (instant - previous.rate);
}
