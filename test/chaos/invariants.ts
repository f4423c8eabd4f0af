/**
 * The chaos suite's invariants, as pure functions of what was observed, so that a unit test can
 * prove each one fails on a doubled instance, a leaked one, a lost job or a silent provider.
 * Instances come from the providers' own inventories (the fakes' objects, the process table),
 * never from our store.
 */

export interface ObservedProxy {
  name: string;
  provider: string;
  phase: string;
  instanceName?: string;
  lastError?: string;
}

export interface ObservedInstance {
  provider: string;
  /** The instance's name on its provider (a Pod, a VM, a local instance directory). */
  name: string;
  /** The proxy it belongs to, by its label (or, for local, its instance directory). */
  proxy: string;
}

/** An instance seen being deleted at a fake, with the labels it had then. */
export interface ObservedDeletion {
  provider: string;
  name: string;
  /** Its fleet and proxy labels (undefined: it had none). */
  fleet: string | undefined;
  proxy: string | undefined;
  /** When the deletion was seen, after the start of the workload. */
  atMs: number;
}

/** What the API said about every proxy at one moment of the run. */
export interface ProxySample {
  atMs: number;
  proxies: readonly ObservedProxy[];
}

/** A deletion a GC sweep logged. */
export interface GcDeletion {
  provider: string;
  instance: string;
  atMs: number;
}

export interface ObservedJob {
  queue: string;
  id: string;
  /** BullMQ's state, or 'missing' when the job is gone from the queue. */
  state: string;
  failedReason?: string;
  attemptsMade: number;
}

export interface FaultWindow {
  fromMs: number;
  untilMs: number;
  what: string;
}

export interface Violation {
  invariant: string;
  /** The objects involved (proxies, instances, jobs, providers). */
  objects: string[];
  detail: string;
}

/** What a fault looks like in a proxy's `lastError`: Failed is accepted only for a reason naming one. */
export const FAULT_REASON =
  /\b500\b|internal|backenderror|timed? ?out|timeout|econnreset|econnrefused|socket hang up|hang|abort|unreachable|network|fetch failed|other side closed|terminated/i;

/**
 * Every name the workload wants on a provider is there, Ready (or Failed with a reason naming a
 * fault), and every name it deleted is gone.
 */
export function checkConverged(desired: ReadonlyMap<string, string | null>, proxies: readonly ObservedProxy[]): Violation[] {
  const out: Violation[] = [];
  const byName = new Map(proxies.map((p) => [p.name, p]));
  for (const [name, want] of desired) {
    const p = byName.get(name);
    if (want === null) {
      if (p) out.push({ invariant: 'deleted proxy gone', objects: [`proxy/${name}`], detail: `still present, phase ${p.phase} on ${p.provider}` });
      continue;
    }
    if (!p) {
      out.push({ invariant: 'applied proxy Ready', objects: [`proxy/${name}`], detail: `missing (wanted on ${want})` });
      continue;
    }
    if (p.provider !== want) out.push({ invariant: 'applied proxy Ready', objects: [`proxy/${name}`], detail: `on ${p.provider}, wanted on ${want}` });
    else if (p.phase === 'Failed' && !FAULT_REASON.test(p.lastError ?? ''))
      out.push({ invariant: 'applied proxy Ready', objects: [`proxy/${name}`], detail: `Failed for a reason that names no fault: ${p.lastError ?? '(none)'}` });
    else if (p.phase !== 'Ready' && p.phase !== 'Failed')
      out.push({ invariant: 'applied proxy Ready', objects: [`proxy/${name}`], detail: `phase ${p.phase}${p.lastError ? ` (${p.lastError})` : ''}` });
  }
  return out;
}

/**
 * Exactly one instance per live (Ready) proxy, on its own provider, and none on any other; no
 * instance without a live proxy (a leak, checked after a GC sweep past the grace period).
 */
export function checkInstances(proxies: readonly ObservedProxy[], instances: readonly ObservedInstance[]): Violation[] {
  const out: Violation[] = [];
  const byProxy = new Map<string, ObservedInstance[]>();
  for (const i of instances) byProxy.set(i.proxy, [...(byProxy.get(i.proxy) ?? []), i]);
  const live = new Map(proxies.filter((p) => p.phase !== 'Terminating').map((p) => [p.name, p]));
  for (const p of live.values()) {
    const mine = byProxy.get(p.name) ?? [];
    const here = mine.filter((i) => i.provider === p.provider);
    const elsewhere = mine.filter((i) => i.provider !== p.provider);
    const list = (is: ObservedInstance[]): string[] => is.map((i) => `${i.provider}/${i.name}`);
    if (here.length > 1)
      out.push({ invariant: 'one instance per proxy', objects: [`proxy/${p.name}`, ...list(here)], detail: `${here.length} instances on ${p.provider}` });
    if (p.phase === 'Ready' && here.length === 0)
      out.push({ invariant: 'one instance per proxy', objects: [`proxy/${p.name}`], detail: `Ready but no instance on ${p.provider}` });
    if (p.phase === 'Ready' && here.length === 1 && p.instanceName && here[0]?.name !== p.instanceName)
      out.push({
        invariant: 'one instance per proxy',
        objects: [`proxy/${p.name}`, ...list(here)],
        detail: `serves ${p.instanceName}, a different instance exists`,
      });
    if (elsewhere.length > 0)
      out.push({
        invariant: 'no leaked instance',
        objects: [`proxy/${p.name}`, ...list(elsewhere)],
        detail: `instances left on a provider the proxy moved away from`,
      });
  }
  for (const [proxy, is] of byProxy) {
    if (!live.has(proxy)) out.push({ invariant: 'no leaked instance', objects: is.map((i) => `${i.provider}/${i.name}`), detail: `no live proxy ${proxy}` });
  }
  return out;
}

/** No kubernetes Secret of a proxy that is gone or no longer on kubernetes (its credentials would outlive it). */
export function checkSecrets(proxies: readonly ObservedProxy[], secrets: readonly ObservedInstance[]): Violation[] {
  const onKube = new Set(proxies.filter((p) => p.provider === 'k8s' && p.phase !== 'Terminating').map((p) => p.name));
  return secrets
    .filter((s) => !onKube.has(s.proxy))
    .map((s) => ({ invariant: 'no leaked instance', objects: [`k8s/${s.name}`], detail: `a Secret of proxy ${s.proxy}, which is not live on k8s` }));
}

/**
 * At no moment two instances of one proxy (the same instance name) on two providers: a move removes
 * the old instance before it makes the new one. Checked on every sample while the run goes on.
 */
export function checkNoDoubleDuringRun(instances: readonly ObservedInstance[]): Violation[] {
  const byName = new Map<string, ObservedInstance[]>();
  for (const i of instances) byName.set(i.name, [...(byName.get(i.name) ?? []), i]);
  const out: Violation[] = [];
  for (const [name, is] of byName) {
    if (is.length > 1)
      out.push({
        invariant: 'one instance per proxy',
        objects: is.map((i) => `${i.provider}/${i.name}`),
        detail: `instance ${name} exists ${is.length} times at once`,
      });
  }
  return out;
}

/** Every enqueued job completed, is still to run, or failed/retries with a reason; none vanished. */
export function checkJobs(jobs: readonly ObservedJob[]): Violation[] {
  const out: Violation[] = [];
  for (const j of jobs) {
    const obj = [`${j.queue}/${j.id}`];
    if (j.state === 'missing') out.push({ invariant: 'no job lost', objects: obj, detail: 'gone from the queue without completing' });
    else if (j.state === 'failed' && !j.failedReason) out.push({ invariant: 'no job lost', objects: obj, detail: 'failed without a reason' });
    else if (j.state === 'delayed' && j.attemptsMade > 0 && !j.failedReason)
      out.push({ invariant: 'no job lost', objects: obj, detail: `retrying (attempt ${j.attemptsMade}) without a reason` });
    else if (j.state === 'active') out.push({ invariant: 'no job lost', objects: obj, detail: 'still active after the cluster settled' });
  }
  return out;
}

/**
 * ProviderHealth published at least once per `intervalMs` (with `slackMs`) for every provider: a gap
 * is a violation unless a fault overlapped it (a checks worker, the publisher, Redis or the
 * provider's network down is a reason for silence; a quiet, healthy cluster is not).
 */
export function checkHealthCadence(
  publications: ReadonlyMap<string, readonly number[]>,
  faults: readonly FaultWindow[],
  o: { intervalMs: number; slackMs: number; fromMs: number; untilMs: number },
): Violation[] {
  const out: Violation[] = [];
  const limit = o.intervalMs + o.slackMs;
  for (const [provider, times] of publications) {
    const points = [o.fromMs, ...times.filter((t) => t >= o.fromMs && t <= o.untilMs), o.untilMs].sort((a, b) => a - b);
    for (let k = 1; k < points.length; k++) {
      const from = points[k - 1] ?? 0;
      const until = points[k] ?? 0;
      if (until - from <= limit) continue;
      const excused = faults.some((f) => f.fromMs < until && f.untilMs + o.slackMs > from);
      if (!excused)
        out.push({
          invariant: 'ProviderHealth published every interval',
          objects: [`providerhealth/${provider}`],
          detail: `nothing published from ${from} ms to ${until} ms (${until - from} ms > ${limit} ms) with no fault in between`,
        });
    }
  }
  return out;
}

const NOT_OURS_DELETED = 'no instance of a live Proxy or another fleet deleted';

/**
 * Nothing deleted at a fake belonged to another fleet or to none (decoys of both kinds are seeded),
 * and no instance a GC sweep collected belonged to a proxy that was live on that provider with that
 * instance both in the last sample before the deletion and in the first one after it (a proxy's
 * instance name comes from its uid, so the same name in both is the same proxy all along).
 */
export function checkDeletions(fleet: string, deletions: readonly ObservedDeletion[], gc: readonly GcDeletion[], samples: readonly ProxySample[]): Violation[] {
  const out: Violation[] = [];
  for (const d of deletions) {
    if (d.fleet === fleet) continue;
    out.push({
      invariant: NOT_OURS_DELETED,
      objects: [`${d.provider}/${d.name}`],
      detail: `deleted at ${d.atMs} ms, but it is ${d.fleet === undefined ? 'unlabelled' : `fleet ${d.fleet}'s`}${d.proxy ? ` (proxy ${d.proxy})` : ''}`,
    });
  }
  const sorted = [...samples].sort((a, b) => a.atMs - b.atMs);
  const owner = (s: ProxySample | undefined, g: GcDeletion): ObservedProxy | undefined =>
    s?.proxies.find((p) => p.provider === g.provider && p.instanceName === g.instance && p.phase !== 'Terminating');
  for (const g of gc) {
    const before = owner(
      sorted.findLast((s) => s.atMs <= g.atMs),
      g,
    );
    const after = owner(
      sorted.find((s) => s.atMs >= g.atMs),
      g,
    );
    if (before && after && before.name === after.name)
      out.push({
        invariant: NOT_OURS_DELETED,
        objects: [`proxy/${after.name}`, `${g.provider}/${g.instance}`],
        detail: `garbage-collected at ${g.atMs} ms while its proxy was live on ${g.provider} with that instance (before and after)`,
      });
  }
  return out;
}

/** No process of the run still alive after the cluster closed. */
export function checkNoLeftovers(processes: readonly { pid: number; command: string }[]): Violation[] {
  return processes.map((p) => ({ invariant: 'no process left behind', objects: [`pid/${p.pid}`], detail: p.command.slice(0, 200) }));
}

export function formatViolations(vs: readonly Violation[]): string {
  return vs.map((v) => `  ✗ ${v.invariant}: ${v.objects.join(', ')} — ${v.detail}`).join('\n');
}
