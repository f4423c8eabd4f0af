import type { Proxy, ProxyPhase } from '../model/proxy-resource.ts';

/** One member as `GET /v1/pools/{name}` shows it: never a credential (discovery hands those out). */
export interface MemberView {
  name: string;
  provider: string;
  placement?: string;
  phase: ProxyPhase;
  createdAt: string;
  /** Set while the member is being deleted (replaced, scaled down, or the pool deleted). */
  deletionRequestedAt?: string;
  url?: string;
  egressIp?: string;
  lastError?: string;
}

export interface MemberSummary {
  /** Members by phase (every phase present in the pool). */
  phases: Partial<Record<ProxyPhase, number>>;
  items: MemberView[];
}

/** The members of a pool, oldest first, and how many are in each phase. */
export function memberSummary(members: readonly Proxy[]): MemberSummary {
  const phases: Partial<Record<ProxyPhase, number>> = {};
  for (const m of members) phases[m.status.phase] = (phases[m.status.phase] ?? 0) + 1;
  const items = [...members]
    .sort((a, b) => a.metadata.createdAt.localeCompare(b.metadata.createdAt) || a.name.localeCompare(b.name))
    .map((m): MemberView => ({
      name: m.name,
      provider: m.spec.provider,
      ...(m.spec.placement === undefined ? {} : { placement: m.spec.placement }),
      phase: m.status.phase,
      createdAt: m.metadata.createdAt,
      ...(m.metadata.deletionRequestedAt ? { deletionRequestedAt: m.metadata.deletionRequestedAt } : {}),
      ...(m.status.url ? { url: m.status.url } : {}),
      ...(m.status.egressIp ? { egressIp: m.status.egressIp } : {}),
      ...(m.status.lastError ? { lastError: m.status.lastError } : {}),
    }));
  return { phases, items };
}
