/**
 * A leaked fleet for GC tests and the gc-scale bench: proxies in the store, and on the kubernetes
 * and Compute fakes a mix of instances a sweep must delete (old, no proxy owns them) and instances
 * it must leave alone (owned, too young, another fleet's, unlabelled).
 */
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { MANAGED_LABELS as GCP_MANAGED_LABELS } from '../../src/providers/gcp/labels.ts';
import { FLEET_LABEL as GCP_FLEET_LABEL, PROXY_LABEL as GCP_PROXY_LABEL } from '../../src/providers/gcp/lifecycle.ts';
import { MANAGED_LABELS as KUBE_MANAGED_LABELS } from '../../src/providers/kubernetes/labels.ts';
import { FLEET_LABEL as KUBE_FLEET_LABEL, PROXY_LABEL as KUBE_PROXY_LABEL } from '../../src/providers/kubernetes/lifecycle-owner.ts';
import { instanceNameFor } from '../../src/proxies/instance-name.ts';
import type { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import type { FakeCompute } from '../fakes/compute/index.ts';
import type { FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';

export interface FleetMix {
  /** Old instances of this fleet that no proxy owns; every tenth names a live proxy (superseded). */
  orphans: number;
  /** Proxies on the provider, each with its instance. */
  owned: number;
  /** Instances of this fleet without a proxy, inside the grace period. */
  young: number;
  /** Other fleets' instances and unlabelled ones (half each), old. */
  foreign: number;
}

export interface SeededFleet {
  /** Instance names a sweep must delete. */
  orphans: string[];
  /** Instance (and other object) names a sweep must never touch. */
  untouchable: string[];
}

/** Created an hour ago: past any grace period a test uses. */
export const OLD = (): string => new Date(Date.now() - 3_600_000).toISOString();

/** Applies `count` proxies on `provider` (in parallel batches) and returns them as stored. */
export async function applyOwners(store: RedisProxyStore, provider: string, count: number): Promise<Proxy[]> {
  const out: Proxy[] = [];
  for (let start = 0; start < count; start += 100) {
    const batch = Array.from({ length: Math.min(100, count - start) }, (_, i) => `${provider}-p${start + i}`);
    const applied = await Promise.all(batch.map((name) => store.apply({ metadata: { name, labels: {} }, spec: { provider } })));
    out.push(...applied.map((a) => a.proxy));
  }
  return out;
}

/** The fleet's instances by kind, named as the mix says. */
function plan(fleet: string, owners: readonly Proxy[], mix: FleetMix) {
  const pad = (i: number): string => String(i).padStart(5, '0');
  const orphans = Array.from({ length: mix.orphans }, (_, i) => ({
    name: `ep-orphan-${pad(i)}-0000`,
    // Every tenth carries the name of a live proxy whose instance is another one (a recreated proxy's old instance).
    proxy: i % 10 === 0 && owners.length ? (owners[i % owners.length]?.name ?? 'gone') : `gone-${pad(i)}`,
  }));
  const owned = owners.map((p) => ({ name: instanceNameFor(fleet, p), proxy: p.name }));
  const young = Array.from({ length: mix.young }, (_, i) => ({ name: `ep-young-${pad(i)}-0000`, proxy: `new-${pad(i)}` }));
  const otherFleet = Array.from({ length: Math.ceil(mix.foreign / 2) }, (_, i) => ({ name: `ep-theirs-${pad(i)}-0000`, proxy: `gone-${pad(i)}` }));
  const unlabelled = Array.from({ length: Math.floor(mix.foreign / 2) }, (_, i) => ({ name: `web-${pad(i)}` }));
  return { orphans, owned, young, otherFleet, unlabelled };
}

/**
 * Seeds the kubernetes fake: each instance a Pod bound to a node (so its deletion is graceful, as
 * with a kubelet) and its Secret, in namespace `proxies`.
 */
export function seedKubeFleet(kube: FakeKubeApiserver, fleet: string, owners: readonly Proxy[], mix: FleetMix): SeededFleet {
  const p = plan(fleet, owners, mix);
  const labels = (proxy: string, f = fleet): Record<string, string> => ({ ...KUBE_MANAGED_LABELS, [KUBE_FLEET_LABEL]: f, [KUBE_PROXY_LABEL]: proxy });
  const seed = (name: string, objectLabels: Record<string, string> | undefined, creationTimestamp: string): void => {
    const metadata = { name, namespace: 'proxies', creationTimestamp, ...(objectLabels ? { labels: objectLabels } : {}) };
    kube.seedPod({
      metadata,
      spec: { containers: [{ name: 'proxy', image: 'proxy:1' }], nodeName: 'node-1' },
      status: { phase: 'Running', podIP: '10.0.0.1' },
    });
    kube.seedSecret({ metadata, type: 'Opaque', data: { PROXY_PASSWORD: Buffer.from('x').toString('base64') } });
  };
  for (const o of p.orphans) seed(o.name, labels(o.proxy), OLD());
  for (const o of p.owned) seed(o.name, labels(o.proxy), OLD());
  for (const o of p.young) seed(o.name, labels(o.proxy), new Date().toISOString());
  for (const o of p.otherFleet) seed(o.name, labels(o.proxy, `${fleet}-other`), OLD());
  for (const o of p.unlabelled) seed(o.name, undefined, OLD());
  return {
    orphans: p.orphans.map((o) => o.name),
    untouchable: [...p.owned, ...p.young, ...p.otherFleet, ...p.unlabelled].map((o) => o.name),
  };
}

/** Seeds the Compute fake: instances spread over its zones (round robin over `zones`). */
export function seedComputeFleet(compute: FakeCompute, zones: readonly string[], fleet: string, owners: readonly Proxy[], mix: FleetMix): SeededFleet {
  const p = plan(fleet, owners, mix);
  const labels = (proxy: string, f = fleet): Record<string, string> => ({ ...GCP_MANAGED_LABELS, [GCP_FLEET_LABEL]: f, [GCP_PROXY_LABEL]: proxy });
  let n = 0;
  const seed = (name: string, instanceLabels: Record<string, string> | undefined, creationTimestamp: string): void => {
    const zone = zones[n++ % zones.length] ?? '';
    compute.seedInstance(zone, { name, creationTimestamp, ...(instanceLabels ? { labels: instanceLabels } : {}) });
  };
  for (const o of p.orphans) seed(o.name, labels(o.proxy), OLD());
  for (const o of p.owned) seed(o.name, labels(o.proxy), OLD());
  for (const o of p.young) seed(o.name, labels(o.proxy), new Date().toISOString());
  for (const o of p.otherFleet) seed(o.name, labels(o.proxy, `${fleet}-other`), OLD());
  for (const o of p.unlabelled) seed(o.name, undefined, OLD());
  return {
    orphans: p.orphans.map((o) => o.name),
    untouchable: [...p.owned, ...p.young, ...p.otherFleet, ...p.unlabelled].map((o) => o.name),
  };
}

/** Plays the kubelet: every Pod being deleted gracefully finishes its deletion. */
export function finishTerminatingPods(kube: FakeKubeApiserver): number {
  const terminating = kube.listPods().filter((pod) => pod.metadata.deletionTimestamp);
  for (const pod of terminating) kube.finishPodDeletion(pod.metadata.namespace, pod.metadata.name);
  return terminating.length;
}

/** Times (performance.now) at which a fake received each request that `matches`, as its 'request' event fires. */
export function arrivals<R extends { method: string; path: string }>(
  fake: { on(event: 'request', l: (r: R) => void): unknown; off(event: 'request', l: (r: R) => void): unknown },
  matches: (r: R) => boolean,
): { times: number[]; stop(): void } {
  const times: number[] = [];
  const listener = (r: R): void => {
    if (matches(r)) times.push(performance.now());
  };
  fake.on('request', listener);
  return { times, stop: () => fake.off('request', listener) };
}

/**
 * Makes the `n`-th request that `matches` (counted from now) answer `status`. Both fakes emit
 * 'request' before they take a fault, so a fault injected from the listener applies to that request.
 */
export function failNth<R extends { method: string; path: string }>(
  fake: {
    on(event: 'request', l: (r: R) => void): unknown;
    off(event: 'request', l: (r: R) => void): unknown;
    injectFault(f: { status: number; match: { method: string; path: string } }): void;
  },
  matches: (r: R) => boolean,
  n: number,
  status: number,
): void {
  let seen = 0;
  const listener = (r: R): void => {
    if (!matches(r) || ++seen < n) return;
    fake.off('request', listener);
    fake.injectFault({ status, match: { method: r.method, path: r.path } });
  };
  fake.on('request', listener);
}
