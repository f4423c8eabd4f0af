import { PROVIDERS, ZONE, type ProviderName } from './cluster.ts';
import { pick, rng } from './faults.ts';

/**
 * The workload that runs throughout a chaos run, drawn from the seed: proxies applied, moved between
 * providers, deleted, applied again under the same name, and ad-hoc checks, through the API as a
 * user would. A request that fails (the API killed or stopped, Redis down) may or may not have taken
 * effect, so the workload keeps what it last *knows* and, once the faults are over, `settle` states
 * the final wish of every name it touched again until the API accepts it: that wish is what the
 * invariants compare the cluster with.
 */
export interface WorkloadStats {
  applies: number;
  moves: number;
  deletes: number;
  reapplies: number;
  checks: number;
  /** Requests that got no answer or a 5xx (the API or Redis was down). */
  unanswered: number;
  /** Applies refused because the proxy was still Terminating (409): tried again later. */
  refused: number;
}

export interface AdhocCheck {
  provider: ProviderName;
  jobId: string;
  atMs: number;
}

export interface Workload {
  /** The final wish per name: a provider, or null for deleted. */
  readonly desired: Map<string, ProviderName | null>;
  readonly checks: AdhocCheck[];
  readonly stats: WorkloadStats;
  /** Steps until `stop` aborts. */
  run(stop: AbortSignal): Promise<void>;
  /** States every name's final wish again until the API accepts it (bounded by `timeoutMs`). */
  settle(timeoutMs: number): Promise<void>;
}

export function proxyYaml(name: string, provider: ProviderName): string {
  return `metadata: { name: ${name} }\nspec: { provider: ${provider}${provider === 'gce' ? `, placement: ${ZONE}` : ''} }\n`;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function createWorkload(api: string, seed: number, o: { names: number; stepMs: number; t0: number }): Workload {
  const r = rng(seed ^ 0x0a11);
  const names = Array.from({ length: o.names }, (_, i) => `cx-${i}`);
  const desired = new Map<string, ProviderName | null>();
  const checks: AdhocCheck[] = [];
  const stats: WorkloadStats = { applies: 0, moves: 0, deletes: 0, reapplies: 0, checks: 0, unanswered: 0, refused: 0 };

  const call = async (method: string, path: string, body?: string): Promise<Response | undefined> => {
    try {
      const res = await fetch(`${api}${path}`, {
        method,
        ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/yaml' } }),
        signal: AbortSignal.timeout(4000),
      });
      if (res.status >= 500) {
        stats.unanswered++;
        await res.body?.cancel();
        return undefined;
      }
      return res;
    } catch {
      stats.unanswered++;
      return undefined;
    }
  };
  const apply = async (name: string, provider: ProviderName): Promise<'ok' | 'refused' | 'unknown'> => {
    const res = await call('POST', '/v1/proxies', proxyYaml(name, provider));
    if (!res) return 'unknown';
    await res.body?.cancel();
    if (res.status === 200) return 'ok';
    if (res.status === 409) return 'refused';
    throw new Error(`apply ${name} on ${provider}: unexpected ${res.status}`);
  };
  const remove = async (name: string): Promise<'ok' | 'unknown'> => {
    const res = await call('DELETE', `/v1/proxies/${name}`);
    if (!res) return 'unknown';
    await res.body?.cancel();
    if (res.status === 202 || res.status === 404) return 'ok';
    throw new Error(`delete ${name}: unexpected ${res.status}`);
  };

  async function step(): Promise<void> {
    const name = pick(r, names);
    const current = desired.get(name) ?? null;
    if (!desired.has(name)) desired.set(name, null);
    const x = r();
    if (current === null) {
      const provider = pick(r, PROVIDERS);
      const result = await apply(name, provider);
      if (result === 'ok') {
        desired.set(name, provider);
        stats.applies++;
      } else if (result === 'refused') stats.refused++;
    } else if (x < 0.3) {
      const provider = pick(
        r,
        PROVIDERS.filter((p) => p !== current),
      );
      const result = await apply(name, provider);
      if (result === 'ok') {
        desired.set(name, provider);
        stats.moves++;
      } else if (result === 'refused') stats.refused++;
    } else if (x < 0.55) {
      if ((await remove(name)) === 'ok') {
        desired.set(name, null);
        stats.deletes++;
      }
    } else if (x < 0.7) {
      if ((await apply(name, current)) === 'ok') stats.reapplies++;
    } else {
      const provider = pick(r, PROVIDERS);
      const res = await call('POST', `/v1/providers/${provider}/checks`);
      if (res?.status === 202) {
        const { jobId } = (await res.json()) as { jobId: string };
        checks.push({ provider, jobId, atMs: Date.now() - o.t0 });
        stats.checks++;
      } else await res?.body?.cancel();
    }
  }

  return {
    desired,
    checks,
    stats,
    async run(stop) {
      while (!stop.aborted) {
        await step();
        await sleep(o.stepMs);
      }
    },
    async settle(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      const pending = new Set(desired.keys());
      while (pending.size > 0) {
        if (Date.now() > deadline) throw new Error(`the API did not accept the final state of ${[...pending].join(', ')} within ${timeoutMs} ms`);
        for (const name of [...pending]) {
          const want = desired.get(name) ?? null;
          const result = want === null ? await remove(name) : await apply(name, want);
          if (result === 'ok') pending.delete(name);
        }
        if (pending.size > 0) await sleep(500);
      }
    },
  };
}
