import { z } from 'zod';
import { parseDuration } from '../schema/duration.ts';
import { parseTrafficQuantity } from '../schema/traffic-quantity.ts';
import { resourceName } from '../schema/zod-helpers.ts';
import { labelKey, labelValue, proxyConditionSchema } from './proxy-resource.ts';

/** The label every member Proxy of a pool carries: `egress-proxies.io/pool=<pool name>`. */
export const POOL_LABEL = 'egress-proxies.io/pool';
/** The member label picks select on (`/pick?tier=`) and `spec.tiers` orders. */
export const TIER_LABEL = 'tier';

/** Members are named `<pool>-<5 characters>`, so a pool's name leaves room for the suffix. */
export const POOL_NAME_MAX = 63 - 6;
export const POOL_REPLICAS_MAX = 5000;

const poolName = resourceName.max(POOL_NAME_MAX, `expected at most ${POOL_NAME_MAX} characters (member names add a 6-character suffix)`);

/** A Go-style duration of at least ten seconds (`30m`, `24h`). */
const maxAge = z
  .string()
  .refine((t) => (parseDuration(t) ?? -1) >= 10_000, 'expected a duration of at least 10s, such as 30m or 24h')
  .meta({ description: 'Members older than this are replaced, surge-first.' });

/** A Go-style duration of at least `minMs` (`idleAfter: 10m`, `scaleDownDelay: 30s`). */
function durationAtLeast(minMs: number, words: string): z.ZodString {
  return z.string().refine((t) => (parseDuration(t) ?? -1) >= minMs, `expected a duration of at least ${words}, such as 30s or 10m`);
}

/** A pool's budget: within each UTC calendar day or month, a spend and/or a traffic limit (docs/usage.md#budgets). */
export const budgetSchema = z.strictObject({
  window: z.enum(['day', 'month']),
  /** In the price table's currency. */
  spend: z.number().positive().max(1e12).optional(),
  /** Bytes both ways: a number, or a quantity such as `500GB` (decimal) or `2TiB` (binary). */
  traffic: z
    .union([z.string().max(32), z.number().int()])
    .refine((v) => parseTrafficQuantity(v) !== undefined, 'expected bytes above 0: a number or a quantity such as 500GB or 2TiB')
    .meta({ intOrString: true })
    .optional(),
  /** At 100 %, picks answer 429 with Retry-After until the window turns (default false: only growth stops). */
  stopPicks: z.boolean().default(false),
});
export type PoolBudget = z.infer<typeof budgetSchema>;

/** Replicas following the pick rate (docs/usage.md#autoscaling). */
export const autoscaleSchema = z.strictObject({
  minReplicas: z.number().int().min(0).max(POOL_REPLICAS_MAX),
  maxReplicas: z.number().int().min(1).max(POOL_REPLICAS_MAX),
  /** Picks per minute one member is meant to serve. */
  picksPerMember: z.number().positive().max(1e9),
  /** No pick for this long: the pool goes to minReplicas. */
  idleAfter: durationAtLeast(1000, '1s'),
  /** A lower count must hold this long before members are removed (default 5m). */
  scaleDownDelay: durationAtLeast(0, '0s').optional(),
});
export type PoolAutoscale = z.infer<typeof autoscaleSchema>;

/** One share of the pool: a provider (and placement) and its weight. */
export const spreadEntrySchema = z.strictObject({
  provider: resourceName,
  placement: z.string().min(1).max(63).optional(),
  weight: z.number().int().min(1).max(1000),
  /** Added to the labels of the members made here (e.g. `{ tier: residential }`), over the template's. */
  labels: z.record(labelKey, labelValue).optional(),
});
export type SpreadEntry = z.infer<typeof spreadEntrySchema>;

/** One ProxyPool as a user writes it (`egress apply -f`, `POST /v1/pools`). */
export const poolDocumentSchema = z
  .strictObject({
    apiVersion: z.literal('egress-proxies/v1').optional(),
    kind: z.literal('ProxyPool'),
    metadata: z.strictObject({
      name: poolName,
      labels: z.record(labelKey, labelValue).default({}),
    }),
    spec: z.strictObject({
      /** Required without `autoscale`; with it, the count the autoscaler starts from. */
      replicas: z.number().int().min(0).max(POOL_REPLICAS_MAX).optional(),
      template: z.strictObject({
        metadata: z.strictObject({ labels: z.record(labelKey, labelValue).default({}) }).default({ labels: {} }),
        spec: z.strictObject({
          /** Required unless `spread` names the providers. */
          provider: resourceName.optional(),
          placement: z.string().min(1).max(63).optional(),
        }),
      }),
      /** Weights across providers or placements; member counts follow them within ±1. */
      spread: z.array(spreadEntrySchema).min(1).max(32).optional(),
      maxAge: maxAge.optional(),
      /** How many members beyond `replicas` may exist while members are replaced (default 1). */
      maxSurge: z.number().int().min(1).max(POOL_REPLICAS_MAX).default(1),
      /** The escalation order of the members' `tier` label: ban feedback names the tier after a member's own. */
      tiers: z.array(labelValue.min(1)).min(1).max(16).optional(),
      budget: budgetSchema.optional(),
      autoscale: autoscaleSchema.optional(),
    }),
  })
  .superRefine((doc, ctx) => {
    if (doc.spec.spread === undefined && doc.spec.template.spec.provider === undefined)
      ctx.addIssue({ code: 'custom', path: ['spec', 'template', 'spec', 'provider'], message: 'required when spec.spread is not given' });
    if (doc.spec.template.metadata.labels[POOL_LABEL] !== undefined)
      ctx.addIssue({ code: 'custom', path: ['spec', 'template', 'metadata', 'labels', POOL_LABEL], message: 'is set by the pool itself' });
    const seen = new Set<string>();
    for (const [i, s] of (doc.spec.spread ?? []).entries()) {
      const key = `${s.provider}\0${s.placement ?? ''}`;
      if (seen.has(key)) ctx.addIssue({ code: 'custom', path: ['spec', 'spread', i], message: 'names the same provider and placement twice' });
      seen.add(key);
      if (s.labels?.[POOL_LABEL] !== undefined)
        ctx.addIssue({ code: 'custom', path: ['spec', 'spread', i, 'labels', POOL_LABEL], message: 'is set by the pool itself' });
    }
    refineScaling(doc.spec, ctx);
    for (const [i, t] of (doc.spec.tiers ?? []).entries())
      if (doc.spec.tiers?.indexOf(t) !== i) ctx.addIssue({ code: 'custom', path: ['spec', 'tiers', i], message: `names tier "${t}" twice` });
  });
export type PoolDocument = z.infer<typeof poolDocumentSchema>;

type SpecShape = {
  replicas?: number | undefined;
  budget?: { spend?: number | undefined; traffic?: unknown } | undefined;
  autoscale?: { minReplicas: number; maxReplicas: number } | undefined;
};

/** The rules between fields of replicas, budget and autoscale, each naming its field. */
function refineScaling(spec: SpecShape, ctx: z.RefinementCtx): void {
  if (spec.replicas === undefined && spec.autoscale === undefined)
    ctx.addIssue({ code: 'custom', path: ['spec', 'replicas'], message: 'required when spec.autoscale is not given' });
  if (spec.budget && spec.budget.spend === undefined && spec.budget.traffic === undefined)
    ctx.addIssue({ code: 'custom', path: ['spec', 'budget'], message: 'needs a limit: spend, traffic or both' });
  const a = spec.autoscale;
  if (a && a.maxReplicas < a.minReplicas)
    ctx.addIssue({
      code: 'custom',
      path: ['spec', 'autoscale', 'maxReplicas'],
      message: `must be at least minReplicas (${a.minReplicas}), got ${a.maxReplicas}`,
    });
}
export type PoolSpec = PoolDocument['spec'];

/** One limit of a budget within its window: how much is used, of what, and the ratio. */
const budgetUseSchema = z.strictObject({ used: z.number().nonnegative(), limit: z.number().positive(), ratio: z.number().nonnegative() });

/** What the pool reconcile last found of the budget (src/pools/budget.ts). */
export const budgetStatusSchema = z.strictObject({
  window: z.enum(['day', 'month']),
  /** The window as [from, to), UTC. */
  from: z.iso.datetime(),
  to: z.iso.datetime(),
  spend: budgetUseSchema.optional(),
  traffic: budgetUseSchema.optional(),
  /** Usage could not be read (no usage store, or it failed): the budget blocks nothing. */
  noUsageData: z.boolean().optional(),
  /** The window (its `from`) BudgetNearlySpent was emitted in, and BudgetExhausted: once per window each. */
  nearlySpentIn: z.iso.datetime().optional(),
  exhaustedIn: z.iso.datetime().optional(),
});
export type BudgetStatus = z.infer<typeof budgetStatusSchema>;

/** The autoscaler's own state, kept in the status so that any worker (or a restarted one) goes on from it (src/pools/autoscale.ts). */
export const autoscaleStatusSchema = z.strictObject({
  /** The member count the autoscaler asks for. */
  desired: z.number().int().nonnegative(),
  /** Why, in words (`12.0 picks/min at 5 per member`, `idle for 10m`, `capped by the budget`). */
  reason: z.string().max(256),
  /** The smoothed pick rate, per minute. */
  rate: z.number().nonnegative(),
  /** The pool's pick counter as last read, and when (the next rate is the difference). */
  picks: z.number().int().nonnegative(),
  readAt: z.iso.datetime(),
  /** The last pick, by Redis's clock. */
  lastPickAt: z.iso.datetime().optional(),
  /** When the autoscaler began (by Redis's clock): before any pick, idleAfter counts from it. */
  startedAt: z.iso.datetime().optional(),
  /** Since when a count below `desired` has been asked for (it applies after scaleDownDelay). */
  lowerSince: z.iso.datetime().optional(),
});
export type AutoscaleStatus = z.infer<typeof autoscaleStatusSchema>;

/** A pool's observed state, as the pool reconcile writes it. */
export const poolStatusSchema = z.strictObject({
  /** `spec.replicas` as last seen, or the autoscaler's count. */
  desired: z.number().int().nonnegative(),
  /** Members that exist and are not being deleted. */
  current: z.number().int().nonnegative(),
  ready: z.number().int().nonnegative(),
  /** Members being replaced (too old, or blocked on too many domains) and their surge replacements not yet Ready. */
  rotating: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  /** A list keyed by `type`; `Ready` is True when `ready >= desired`. */
  conditions: z.array(proxyConditionSchema).meta({ listMapKeys: ['type'] }),
  lastError: z.string().optional(),
  observedGeneration: z.number().int().nonnegative(),
  budget: budgetStatusSchema.optional(),
  autoscale: autoscaleStatusSchema.optional(),
});
export type PoolStatus = z.infer<typeof poolStatusSchema>;

/** A ProxyPool as stored and served. */
export interface Pool {
  name: string;
  labels: Record<string, string>;
  spec: PoolSpec;
  /**
   * Set when the stored spec breaks the API's schema (written around the API): one
   * `spec.<field>: <problem>` line each. `spec` then holds only the fields that passed (0 replicas
   * when `replicas` did not), and the pool reconcile makes no members, reporting these.
   */
  specProblems?: string[];
  metadata: {
    uid: string;
    /** Moves only when the spec or labels change. */
    generation: number;
    createdAt: string;
    /** Set by `delete`; the pool disappears once its members are gone. */
    deletionRequestedAt?: string;
  };
  status: PoolStatus;
}

export function emptyPoolStatus(): PoolStatus {
  return { desired: 0, current: 0, ready: 0, rotating: 0, failed: 0, conditions: [], observedGeneration: 0 };
}
