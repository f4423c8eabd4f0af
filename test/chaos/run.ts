import { fleetOf } from '../../src/proxies/instance-name.ts';
import { seedComputeFleet, seedKubeFleet } from '../support/gc-fleet.ts';
import { DEFAULT_TIMINGS, PROVIDERS, ZONE, startChaosCluster, type ChaosCluster } from './cluster.ts';
import { describeFault, faultSchedule, localProxyProcesses, playFaults, type TimelineEntry } from './faults.ts';
import {
  checkConverged,
  checkDeletions,
  checkHealthCadence,
  checkInstances,
  checkJobs,
  checkNoDoubleDuringRun,
  checkNoLeftovers,
  checkSecrets,
  formatViolations,
  type GcDeletion,
  type ProxySample,
  type Violation,
} from './invariants.ts';
import { gcSweptSince, healthOf, inventory, jobsOf, kubeSecrets, proxiesOf, recordDeletions } from './observe.ts';
import { processesUnder } from '../support/processes-under.ts';
import { createWorkload, type WorkloadStats } from './workload.ts';

/**
 * One chaos run: the cluster up, the workload and the fault schedule played together for
 * `faultsMs`, then the workload's final wishes stated again, the cluster left to settle, one GC
 * sweep per provider past the grace period awaited (the gc queue's completions), and every invariant
 * checked; then everything is deleted and stopped, and nothing may be left running. Other fleets' and
 * unlabelled instances are seeded on the cloud fakes first, and every deletion at the fakes is recorded.
 */
export interface ChaosOptions {
  seed: number;
  /** How many faults are injected (the workload runs until the last one is over). */
  faults: number;
  /** Proxy names the workload cycles through. */
  names: number;
  /** Pause between workload steps. */
  stepMs: number;
  /** The workload goes on after the last fault until the workers have logged this many reconciles (at most `settleMs` more). */
  minReconciles: number;
  /** How long the cluster gets to converge after the last fault. */
  settleMs: number;
  /** Where the cluster's files go (removed by the caller). */
  dir: string;
  log?: (line: string) => void;
}

export interface ChaosFigures {
  seed: number;
  reconciles: number;
  faults: number;
  /** Reconcile and check attempts that failed and were retried, and jobs taken over after a worker stalled. */
  retries: number;
  stalled: number;
  /** From the end of the last fault until every invariant held (undefined: it never did). */
  settleMs: number | undefined;
  duplicates: number;
  leaks: number;
  /** Orphans the GC sweeps deleted (instances a reconcile left behind, collected by the backstop): `instance (reason, at)`. */
  gcCollected: string[];
  /** Proxies Failed at the end (allowed only for a reason naming a fault), with their reasons. */
  failedAtEnd: string[];
  /** ProviderHealth publications seen per provider (the sampler reads them every second). */
  publications: Record<string, number>;
  runMs: number;
  workload: WorkloadStats;
}

export interface ChaosResult {
  figures: ChaosFigures;
  timeline: TimelineEntry[];
  violations: Violation[];
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const GC_GRACE_MS = 5000;
const GC_INTERVAL_MS = 5000;
const GC_LINE = 'garbage-collected an instance no proxy owns';
const CHECK_INTERVAL_MS = 10_000;
const RECONCILED = '"msg":"reconciled proxy"';

function countLines(c: ChaosCluster, text: string): number {
  let n = 0;
  for (const role of Object.values(c.roles)) for (const p of role.history) n += p.logs().split(text).length - 1;
  return n;
}

/** The GC's deletions, from the workers' logs. */
function gcCollected(c: ChaosCluster, t0: number): string[] {
  const out: string[] = [];
  for (const role of Object.values(c.roles))
    for (const p of role.history)
      for (const line of p.logs().split('\n')) {
        if (!line.includes(GC_LINE)) continue;
        try {
          const e = JSON.parse(line) as { instance: string; reason: string; time: number; provider?: string; createdAt?: string };
          const made = e.createdAt ? `, made at ${Date.parse(e.createdAt) - t0} ms` : '';
          out.push(`${e.provider ?? '?'}/${e.instance} (${e.reason}${made}, collected at ${e.time - t0} ms)`);
        } catch {
          out.push(line.slice(0, 200));
        }
      }
  return out;
}

/** The GC's deletions with their providers and times, from the workers' logs. */
function gcDeletions(c: ChaosCluster, t0: number): GcDeletion[] {
  const out: GcDeletion[] = [];
  for (const role of Object.values(c.roles))
    for (const p of role.history)
      for (const line of p.logs().split('\n')) {
        if (!line.includes(GC_LINE)) continue;
        try {
          const e = JSON.parse(line) as { instance: string; time: number; provider?: string };
          if (e.provider) out.push({ provider: e.provider, instance: e.instance, atMs: e.time - t0 });
        } catch {
          // a line cut by a SIGKILL
        }
      }
  return out;
}

/** A report a failing run prints: the seed to replay, the fault timeline, each violation with its objects. */
export function formatReport(r: ChaosResult): string {
  const f = r.figures;
  const lines = [
    `chaos seed ${f.seed} (replay: npm run chaos -- --seed ${f.seed}, or CHAOS_SEED=${f.seed} for the bounded test)`,
    `figures: ${JSON.stringify({ ...f, workload: undefined })}`,
    `workload: ${JSON.stringify(f.workload)}`,
    'fault timeline (ms after the start of the workload):',
    ...[...r.timeline].sort((a, b) => a.atMs - b.atMs).map((t) => `  ${String(t.atMs).padStart(7)} → ${String(t.untilMs).padStart(7)}  ${t.what}`),
  ];
  if (r.violations.length > 0) lines.push(`violated invariants (${r.violations.length}):`, formatViolations(r.violations));
  return lines.join('\n');
}

export async function runChaos(o: ChaosOptions): Promise<ChaosResult> {
  const log = o.log ?? (() => undefined);
  const started = Date.now();
  const c = await startChaosCluster(o.dir, DEFAULT_TIMINGS);
  log(`cluster up in ${Date.now() - started} ms (prefix ${c.prefix})`);
  const fleet = fleetOf(c.prefix);
  // Decoys GC must never touch: old instances of another fleet and unlabelled ones, on each cloud fake.
  const decoys = { orphans: 0, owned: 0, young: 0, foreign: 4 };
  seedKubeFleet(c.kube, fleet, [], decoys);
  seedComputeFleet(c.compute, [ZONE], fleet, [], decoys);
  const t0 = Date.now();
  const deletionRecorder = recordDeletions(c, t0);
  const samples: ProxySample[] = [];
  const schedule = faultSchedule(o.seed, o.faults);
  log(`seed ${o.seed}: ${schedule.length} faults: ${schedule.map((s) => describeFault(s.fault)).join('; ')}`);
  const timeline: TimelineEntry[] = [];
  const violations: Violation[] = [];
  const seenDuringRun = new Set<string>();
  const publications = new Map<string, number[]>(PROVIDERS.map((p) => [p, []]));
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      // Continuously: never one instance name on two providers at once (a move makes before it breaks).
      for (const v of checkNoDoubleDuringRun(await inventory(c))) {
        const key = v.objects.join(',');
        if (!seenDuringRun.has(key)) {
          seenDuringRun.add(key);
          violations.push({ ...v, detail: `${v.detail} (at ${Date.now() - t0} ms)` });
        }
      }
      const proxies = await proxiesOf(c);
      if (proxies) samples.push({ atMs: Date.now() - t0, proxies });
      for (const [provider, at] of await healthOf(c)) {
        const list = publications.get(provider);
        if (list && Number.isFinite(at) && !list.includes(at - t0)) list.push(at - t0);
      }
      await sleep(1000);
    }
  })();

  let settleMs: number | undefined;
  let failedAtEnd: string[] = [];
  const workload = createWorkload(c.api, o.seed, { names: o.names, stepMs: o.stepMs, t0 });
  try {
    const stopWorkload = new AbortController();
    const running = workload.run(stopWorkload.signal);
    await playFaults(c, schedule, o.seed, timeline, t0, log);
    const enough = Date.now() + o.settleMs;
    while (countLines(c, RECONCILED) < o.minReconciles && Date.now() < enough) await sleep(500);
    stopWorkload.abort();
    await running;
    const lastFault = Date.now();
    log(`faults over after ${lastFault - t0} ms (${timeline.length} faults); stating the final wishes again`);
    await workload.settle(o.settleMs);

    // Settle: until every applied proxy is Ready (or Failed for a fault) and the inventories match.
    const deadline = lastFault + o.settleMs;
    let pending: Violation[] = [];
    for (;;) {
      const proxies = await proxiesOf(c);
      pending = proxies
        ? [...checkConverged(workload.desired, proxies), ...checkInstances(proxies, await inventory(c))]
        : [{ invariant: 'api', objects: [], detail: 'the API does not answer' }];
      if (pending.length === 0) {
        settleMs = Date.now() - lastFault;
        break;
      }
      if (Date.now() > deadline) break;
      await sleep(500);
    }
    log(settleMs === undefined ? `not settled within ${o.settleMs} ms` : `settled ${settleMs} ms after the last fault`);
    // A GC sweep of every provider that started past the grace period of everything made so far, then
    // the inventories again: nothing may be left over.
    await gcSweptSince(c, PROVIDERS, Date.now() + GC_GRACE_MS, GC_GRACE_MS + 4 * GC_INTERVAL_MS).catch((err: unknown) =>
      violations.push({ invariant: 'no leaked instance', objects: [], detail: (err as Error).message }),
    );
    const proxies = (await proxiesOf(c)) ?? [];
    failedAtEnd = proxies.filter((p) => p.phase === 'Failed').map((p) => `${p.name}: ${p.lastError ?? ''}`);
    violations.push(...checkConverged(workload.desired, proxies), ...checkInstances(proxies, await inventory(c)), ...checkSecrets(proxies, kubeSecrets(c)));
    violations.push(
      ...checkJobs(
        await jobsOf(
          c,
          workload.checks.map((j) => j.jobId),
        ),
      ),
    );
    const end = Date.now() - t0;
    sampling = false;
    await sampler;
    violations.push(...checkDeletions(fleet, deletionRecorder.stop(), gcDeletions(c, t0), samples));
    violations.push(
      ...checkHealthCadence(
        publications,
        timeline.map((t) => ({ fromMs: t.atMs, untilMs: t.untilMs, what: t.what })),
        // The first round starts with the scheduler; the check itself may take its whole timeout.
        { intervalMs: CHECK_INTERVAL_MS, slackMs: CHECK_INTERVAL_MS, fromMs: 0, untilMs: end },
      ),
    );
  } finally {
    sampling = false;
    await sampler;
    deletionRecorder.stop();
    await cleanUp(c, log);
  }
  const left = await processesUnder(o.dir);
  for (const p of left) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  violations.push(...checkNoLeftovers(left));
  const figures: ChaosFigures = {
    seed: o.seed,
    reconciles: countLines(c, RECONCILED),
    faults: timeline.length,
    retries: countLines(c, 'job failed; will retry'),
    stalled: countLines(c, 'job stalled'),
    settleMs,
    duplicates: violations.filter((v) => v.invariant === 'one instance per proxy').length,
    leaks: violations.filter((v) => v.invariant === 'no leaked instance').length,
    gcCollected: gcCollected(c, t0),
    failedAtEnd,
    publications: Object.fromEntries([...publications].map(([p, times]) => [p, times.length])),
    runMs: Date.now() - started,
    workload: workload.stats,
  };
  return { figures, timeline, violations };
}

/** Deletes every proxy (so local proxy processes stop), then stops the cluster. */
async function cleanUp(c: ChaosCluster, log: (line: string) => void): Promise<void> {
  for (const relay of Object.values(c.relays)) relay.setMode('pass');
  for (const role of Object.values(c.roles)) {
    if (role.stopped) {
      role.proc.child.kill('SIGCONT');
      role.stopped = false;
    }
  }
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const proxies = await proxiesOf(c);
    if (proxies?.length === 0) break;
    for (const p of proxies ?? []) await fetch(`${c.api}/v1/proxies/${p.name}`, { method: 'DELETE', signal: AbortSignal.timeout(3000) }).catch(() => undefined);
    await sleep(1000);
  }
  // The proxy host goes with its last proxy, or 3 s after it was left with nothing to serve (a restarted host
  // that restored nothing, deletes that overlapped): give it that long before counting what is left.
  let stray = await localProxyProcesses(c.dataDir);
  for (const until = Date.now() + 10_000; stray.length > 0 && Date.now() < until; stray = await localProxyProcesses(c.dataDir)) await sleep(250);
  if (stray.length > 0) log(`local proxy processes still running 10 s after every proxy was deleted: ${stray.map((s) => s.pid).join(', ')}`);
  await c.close();
}
