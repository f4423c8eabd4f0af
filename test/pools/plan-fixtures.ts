import { emptyPoolStatus, POOL_LABEL, poolDocumentSchema, type Pool } from '../../src/model/pool-resource.ts';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import type { PoolPlan } from '../../src/pools/plan-pool.ts';
import { nextPoolStatus } from '../../src/pools/pool-status.ts';

/* Pools, members and plan summaries for the table of test/pools/reconcile-pool-plan.test.ts (no store). */

export const NOW = new Date('2026-11-01T12:00:00.000Z');
export const MIN = 60_000;
const ago = (minutes: number): string => new Date(NOW.getTime() - minutes * MIN).toISOString();

/** A member of pool `web` as the table writes it: `at` is `provider` or `provider/placement`. */
export interface MemberRow {
  name: string;
  phase?: Proxy['status']['phase'];
  ageMin?: number;
  at?: string;
  labels?: Record<string, string>;
  /** Failed for this many minutes (its Ready condition flipped then). */
  failedMin?: number;
  lastError?: string;
  deleting?: boolean;
}

/** `'name [age]m [@where] [Phase] [deleting]'` (as `'a 70m @kvm/home Provisioning'`) is a MemberRow in short. */
function parseRow(text: string): MemberRow {
  const [name = '', ...words] = text.split(' ');
  const row: MemberRow = { name };
  for (const w of words) {
    const age = /^(\d+(?:\.\d+)?)m$/.exec(w);
    if (age) row.ageMin = Number(age[1]);
    else if (w.startsWith('@')) row.at = w.slice(1);
    else if (w === 'deleting') row.deleting = true;
    else row.phase = w as Proxy['status']['phase'];
  }
  return row;
}

export function member(short: MemberRow | string): Proxy {
  const row = typeof short === 'string' ? parseRow(short) : short;
  const [provider = 'local', placement] = (row.at ?? 'local').split('/');
  const phase = row.failedMin !== undefined ? 'Failed' : (row.phase ?? 'Ready');
  const failed =
    row.failedMin === undefined ? [] : [{ type: 'Ready', status: 'False' as const, reason: 'Failed', message: 'x', lastTransitionTime: ago(row.failedMin) }];
  return {
    name: `web-${row.name}`,
    labels: row.labels ?? { [POOL_LABEL]: 'web' },
    spec: { provider, ...(placement === undefined ? {} : { placement }) },
    metadata: { uid: row.name, generation: 1, createdAt: ago(row.ageMin ?? 5), ...(row.deleting ? { deletionRequestedAt: ago(0) } : {}) },
    status: { phase, conditions: failed, observedGeneration: 1, ...(row.lastError === undefined ? {} : { lastError: row.lastError }) },
  };
}

/** Pool `web` with `spec` as a user writes it (schema defaults filled in; `raw`: taken as is, as kubectl may write it). */
export function pool(spec: Record<string, unknown>, options: { deleting?: boolean; specProblems?: string[]; raw?: boolean } = {}): Pool {
  const full = { template: { spec: { provider: 'local' } }, ...spec };
  return {
    name: 'web',
    labels: {},
    spec: options.raw ? (spec as Pool['spec']) : poolDocumentSchema.parse({ kind: 'ProxyPool', metadata: { name: 'web' }, spec: full }).spec,
    ...(options.specProblems ? { specProblems: options.specProblems } : {}),
    metadata: { uid: 'u', generation: 1, createdAt: ago(600), ...(options.deleting ? { deletionRequestedAt: ago(1) } : {}) },
    status: emptyPoolStatus(),
  };
}

/** A spread of `gcp` and `kvm/home` by these weights, the template naming no provider. */
export function spread(gcp: number, kvmHome: number): Record<string, unknown> {
  const entries = [
    { provider: 'gcp', weight: gcp },
    { provider: 'kvm', placement: 'home', weight: kvmHome },
  ];
  return { spread: entries, template: { spec: {} } };
}

/** Member suffixes `n1`, `n2`… */
export function counter(): () => string {
  let n = 0;
  return () => `n${++n}`;
}

/** The plan as a user would see it carried out: names deleted and created (with where and why), the status written, the next look. */
export interface PlanSummary {
  kind: PoolPlan['kind'];
  clear: string[];
  deletes: string[];
  creates: string[];
  relabels: string[];
  status?: Record<string, number | string>;
  look: number | 'none';
  changes: boolean;
  remaining?: number;
  message?: string;
}

const because = (cause: string, why: string | undefined): string => `${cause}${why === undefined ? '' : ` (${why})`}`;

export function summary(target: Pool, plan: PoolPlan, changes: boolean): PlanSummary {
  const out: PlanSummary = { kind: plan.kind, clear: plan.clear, deletes: [], creates: [], relabels: [], look: 'none', changes };
  if (plan.kind === 'remove') return out;
  const s = nextPoolStatus(target, plan.status, NOW);
  const ready = s.conditions.find((c) => c.type === 'Ready');
  out.status = { desired: s.desired, current: s.current, ready: s.ready, rotating: s.rotating, failed: s.failed, Ready: `${ready?.status} ${ready?.reason}` };
  if (s.lastError !== undefined) out.status.lastError = s.lastError;
  if (plan.kind === 'invalid') return { ...out, message: plan.message };
  out.deletes = plan.deletes.map((d) => `${d.member.name} ${because(d.cause, d.why)}`);
  if (plan.kind === 'deleting') return { ...out, remaining: plan.remaining };
  const where = (spec: Proxy['spec']): string => (spec.placement === undefined ? spec.provider : `${spec.provider}/${spec.placement}`);
  out.creates = plan.creates.map((c) => `${c.name}@${where(c.spec)} ${because(c.cause, c.why)}`);
  out.relabels = plan.relabels.map((r) => r.member.name);
  out.look = plan.lookAfterMs ?? 'none';
  return out;
}

/** A status as the plan tables write it: desired, current, ready, rotating, failed, and the Ready condition. */
export const st = (desired: number, current: number, ready: number, rotating: number, failed: number, Ready: string) => ({
  desired,
  current,
  ready,
  rotating,
  failed,
  Ready,
});
