import { basename } from 'node:path';
import { Job, Queue, QueueEvents } from 'bullmq';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { FLEET_LABEL as GCE_FLEET_LABEL, PROXY_LABEL as GCE_PROXY_LABEL } from '../../src/providers/gcp/lifecycle.ts';
import { FLEET_LABEL as KUBE_FLEET_LABEL, PROXY_LABEL as KUBE_PROXY_LABEL } from '../../src/providers/kubernetes/lifecycle.ts';
import { fleetOf } from '../../src/proxies/instance-name.ts';
import { NAMESPACE, type ChaosCluster } from './cluster.ts';
import { localProxyProcesses } from './faults.ts';
import { isHostProcess, isProxyProcess } from '../../src/providers/local/process-table.ts';
import { servedByHost } from '../support/local-host.ts';
import type { ObservedDeletion, ObservedInstance, ObservedJob, ObservedProxy } from './invariants.ts';

/** What the chaos suite reads of the cluster: the providers' own inventories, the API, the queues. */

/** Every instance of this fleet the providers hold: Pods and VMs not being deleted, live local proxy processes. */
export async function inventory(c: ChaosCluster): Promise<ObservedInstance[]> {
  // The cloud fakes are read in one tick; local instances take socket round trips. So that every
  // instance counted existed at the cloud snapshot's moment (a move finishing meanwhile would show
  // one proxy on two providers), local instances are those seen both before and after it.
  const before = new Set(await localInstances(c.dataDir));
  const fleet = fleetOf(c.prefix);
  // Other fleets' and unlabelled decoys (seeded by the run) are not this cluster's instances.
  const pods = c.kube
    .listPods(NAMESPACE)
    .filter((p) => !p.metadata.deletionTimestamp && p.metadata.labels?.[KUBE_FLEET_LABEL] === fleet)
    .map((p) => ({ provider: 'k8s', name: p.metadata.name, proxy: p.metadata.labels?.[KUBE_PROXY_LABEL] ?? '(unlabelled)' }));
  const vms = c.compute
    .listInstances()
    .filter((i) => i.status !== 'STOPPING' && i.labels?.[GCE_FLEET_LABEL] === fleet)
    .map((i) => ({ provider: 'gce', name: i.name, proxy: i.labels?.[GCE_PROXY_LABEL] ?? '(unlabelled)' }));
  const after = await localInstances(c.dataDir);
  const local = after.filter((name) => before.has(name)).map((name) => ({ provider: 'local', name, proxy: /^ep-(.+)-[0-9a-f]{8}$/.exec(name)?.[1] ?? name }));
  return [...pods, ...vms, ...local];
}

/**
 * The local instances served now: a proxy host serves every local proxy of its data directory
 * (asked over its socket, once per directory: a second host starting there exits at once); a
 * proxy process of the earlier model serves the one instance its directory names.
 */
async function localInstances(root: string): Promise<string[]> {
  const names = new Set<string>();
  const asked = new Set<string>();
  for (const { pid, instanceDir } of await localProxyProcesses(root)) {
    if (await isHostProcess(pid, instanceDir)) {
      if (asked.has(instanceDir)) continue;
      asked.add(instanceDir);
      for (const name of await servedByHost(instanceDir, AbortSignal.timeout(5000))) names.add(name);
    } else if (await isProxyProcess(pid, instanceDir)) names.add(basename(instanceDir));
  }
  return [...names];
}

/** The proxies' Secrets on kubernetes (credentials and policy, one per Pod), as instances of their own. */
export function kubeSecrets(c: ChaosCluster): ObservedInstance[] {
  const fleet = fleetOf(c.prefix);
  return c.kube.listSecrets(NAMESPACE).flatMap((s) => {
    const proxy = s.metadata.labels?.[KUBE_PROXY_LABEL];
    return proxy && s.metadata.labels?.[KUBE_FLEET_LABEL] === fleet ? [{ provider: 'k8s', name: `secret/${s.metadata.name}`, proxy }] : [];
  });
}

/** The proxies as the API serves them; undefined when the API does not answer. */
export async function proxiesOf(c: ChaosCluster): Promise<ObservedProxy[] | undefined> {
  try {
    const res = await fetch(`${c.api}/v1/proxies`, { signal: AbortSignal.timeout(3000) });
    if (res.status !== 200) return undefined;
    const { items } = (await res.json()) as { items: ProxyView[] };
    return items.map((p) => ({
      name: p.name,
      provider: p.spec.provider,
      phase: p.status.phase,
      ...(p.status.instanceName ? { instanceName: p.status.instanceName } : {}),
      ...(p.status.lastError ? { lastError: p.status.lastError } : {}),
    }));
  } catch {
    return undefined;
  }
}

/** Each provider's `lastCheckTime` as the API serves it now. */
export async function healthOf(c: ChaosCluster): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  try {
    const res = await fetch(`${c.api}/v1/providerhealths`, { signal: AbortSignal.timeout(2000) });
    if (res.status !== 200) return out;
    const { items } = (await res.json()) as { items: ProviderHealth[] };
    for (const ph of items) out.set(ph.name, Date.parse(ph.status.lastCheckTime));
  } catch {
    // the API or Redis is down: nothing seen this time
  }
  return out;
}

/** The state of the ad-hoc check jobs, and every failed or active job of the reconcile and checks queues. */
export async function jobsOf(c: ChaosCluster, checkIds: readonly string[]): Promise<ObservedJob[]> {
  const out: ObservedJob[] = [];
  for (const name of [QUEUES.checks, QUEUES.reconcile]) {
    const queue = new Queue(name, { connection: redisOptions(c.redisUrl, 'producer'), prefix: c.prefix });
    try {
      const seen = new Set<string>();
      for (const job of await queue.getJobs(['failed', 'active', 'delayed'])) {
        if (!job.id) continue;
        seen.add(job.id);
        out.push({
          queue: name,
          id: job.id,
          state: await job.getState(),
          attemptsMade: job.attemptsMade,
          ...(job.failedReason ? { failedReason: job.failedReason } : {}),
        });
      }
      if (name !== QUEUES.checks) continue;
      for (const id of new Set(checkIds)) {
        if (seen.has(id)) continue;
        const job = await queue.getJob(id);
        out.push({
          queue: name,
          id,
          state: job ? await job.getState() : 'missing',
          attemptsMade: job?.attemptsMade ?? 0,
          ...(job?.failedReason ? { failedReason: job.failedReason } : {}),
        });
      }
    } finally {
      await queue.close();
    }
  }
  return out;
}

/**
 * Records every deletion at the cloud fakes as it happens (read in this process every 50 ms): a Pod
 * given a deletionTimestamp or gone, a VM STOPPING or gone, with the labels it had (its fleet and
 * proxy) and when. `stop()` ends the recording and returns what was seen.
 */
export function recordDeletions(c: ChaosCluster, t0: number): { stop(): ObservedDeletion[] } {
  const deletions: ObservedDeletion[] = [];
  const live = new Map<string, { provider: string; name: string; fleet: string | undefined; proxy: string | undefined }>();
  const tick = (): void => {
    const now = new Map<string, { provider: string; name: string; fleet: string | undefined; proxy: string | undefined; deleting: boolean }>();
    for (const p of c.kube.listPods(NAMESPACE)) {
      const l = p.metadata.labels;
      now.set(`k8s/${p.metadata.name}`, {
        provider: 'k8s',
        name: p.metadata.name,
        fleet: l?.[KUBE_FLEET_LABEL],
        proxy: l?.[KUBE_PROXY_LABEL],
        deleting: Boolean(p.metadata.deletionTimestamp),
      });
    }
    for (const i of c.compute.listInstances()) {
      now.set(`gce/${i.name}`, {
        provider: 'gce',
        name: i.name,
        fleet: i.labels?.[GCE_FLEET_LABEL],
        proxy: i.labels?.[GCE_PROXY_LABEL],
        deleting: i.status === 'STOPPING',
      });
    }
    const atMs = Date.now() - t0;
    for (const [key, was] of live) {
      const is = now.get(key);
      if (is && !is.deleting) continue;
      deletions.push({ ...was, atMs });
      live.delete(key);
    }
    for (const [key, { deleting, ...is }] of now) if (!deleting) live.set(key, is);
  };
  tick();
  const timer = setInterval(tick, 50);
  return {
    stop() {
      clearInterval(timer);
      tick();
      return deletions;
    },
  };
}

/**
 * Resolves once every provider of `providers` has completed a GC sweep that started at `sinceMs`
 * (epoch) or later — the `gc` queue's own completion events, each job read for its provider and
 * start — or rejects after `timeoutMs`.
 */
export async function gcSweptSince(c: ChaosCluster, providers: readonly string[], sinceMs: number, timeoutMs: number): Promise<void> {
  const connection = redisOptions(c.redisUrl, 'producer');
  const events = new QueueEvents(QUEUES.gc, { connection, prefix: c.prefix });
  const queue = new Queue(QUEUES.gc, { connection, prefix: c.prefix });
  const waiting = new Set(providers);
  try {
    await events.waitUntilReady();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no GC sweep of ${[...waiting].join(', ')} started after the cluster settled within ${timeoutMs} ms`)),
        timeoutMs,
      );
      events.on('completed', ({ jobId }) => {
        void Job.fromId<{ provider?: string }>(queue, jobId).then((job) => {
          const provider = job?.data.provider;
          if (!job || !provider || (job.processedOn ?? 0) < sinceMs) return;
          waiting.delete(provider);
          if (waiting.size === 0) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
    });
  } finally {
    await events.close();
    await queue.close();
  }
}
