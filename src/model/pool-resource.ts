import { z } from 'zod';
import { parseDuration } from '../schema/duration.ts';
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
      replicas: z.number().int().min(0).max(POOL_REPLICAS_MAX),
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
    for (const [i, t] of (doc.spec.tiers ?? []).entries())
      if (doc.spec.tiers?.indexOf(t) !== i) ctx.addIssue({ code: 'custom', path: ['spec', 'tiers', i], message: `names tier "${t}" twice` });
  });
export type PoolDocument = z.infer<typeof poolDocumentSchema>;
export type PoolSpec = PoolDocument['spec'];

/** A pool's observed state, as the pool reconcile writes it. */
export const poolStatusSchema = z.strictObject({
  /** `spec.replicas` as last seen. */
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
