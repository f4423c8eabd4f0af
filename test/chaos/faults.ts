import { readdir, readFile } from 'node:fs/promises';
import { isProxyHostProgram, isProxyProgram } from '../../src/providers/local/process-table.ts';
import { CLOUD_PROVIDERS, ROLE_NAMES, type ChaosCluster, type CloudProvider, type RoleName } from './cluster.ts';

/** A small seeded generator (mulberry32): the same seed gives the same schedule and workload. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const pick = <T>(r: () => number, items: readonly T[]): T => items[Math.floor(r() * items.length)] as T;
const between = (r: () => number, lo: number, hi: number): number => Math.round(lo + r() * (hi - lo));

export type Fault =
  | { kind: 'sigkill'; role: RoleName; downMs: number }
  | { kind: 'sigstop'; role: RoleName; downMs: number }
  | { kind: 'redis-restart'; downMs: number }
  | { kind: 'provider-500' | 'provider-hang' | 'network-cut'; provider: CloudProvider; downMs: number }
  /** The provider's instance listing (Pods, VMs) answered without `items`, with garbage items, or with a page token that repeats for ever. */
  | { kind: 'inventory-malformed'; provider: CloudProvider; shape: InventoryShape; downMs: number }
  | { kind: 'local-proxy-kill' };

export const INVENTORY_SHAPES = ['no-items', 'garbage', 'repeat-token'] as const;
export type InventoryShape = (typeof INVENTORY_SHAPES)[number];

export interface ScheduledFault {
  /** Milliseconds after the start of the run. */
  atMs: number;
  fault: Fault;
  /** Begins while the previous fault still lasts (unless that one has the same target). */
  overlaps: boolean;
}

/** What a fault acts on: two faults on one target never run at once. */
export function targetOf(f: Fault): string {
  if (f.kind === 'sigkill' || f.kind === 'sigstop') return f.role;
  if (f.kind === 'redis-restart') return 'redis';
  if (f.kind === 'local-proxy-kill') return 'local';
  return f.provider;
}

/** What happened, for the timeline a failing run prints. */
export interface TimelineEntry {
  atMs: number;
  /** Until when the fault lasted (its recovery included); equal to `atMs` for instant ones. */
  untilMs: number;
  what: string;
}

const KINDS = [
  'sigkill',
  'sigkill',
  'sigstop',
  'redis-restart',
  'provider-500',
  'provider-hang',
  'network-cut',
  'local-proxy-kill',
  'inventory-malformed',
] as const;

/**
 * The fault schedule of a run: `count` faults, mostly one after another (each planned once the
 * previous one is over, after a gap of `gapMs`); one in three begins while the previous one still
 * lasts. A SIGSTOP may outlast the job lock and the leader lease (3 s), so a frozen worker or
 * leader wakes up after others took its work over. Drawn from `seed` only, so a seed replays the
 * same faults in the same order; their moments shift when a restart takes longer than planned.
 */
export function faultSchedule(seed: number, count: number, gapMs: readonly [number, number] = [300, 1500]): ScheduledFault[] {
  const r = rng(seed ^ 0x5eed);
  const out: ScheduledFault[] = [];
  let at = between(r, ...gapMs);
  while (out.length < count) {
    const kind = pick(r, KINDS);
    let fault: Fault;
    if (kind === 'sigkill') fault = { kind, role: pick(r, ROLE_NAMES), downMs: between(r, 200, 2500) };
    else if (kind === 'sigstop') fault = { kind, role: pick(r, ROLE_NAMES), downMs: between(r, 500, 8000) };
    else if (kind === 'redis-restart') fault = { kind, downMs: between(r, 200, 2000) };
    else if (kind === 'local-proxy-kill') fault = { kind };
    // Long enough for a GC sweep (every 5 s) to list the provider while it lasts.
    else if (kind === 'inventory-malformed')
      fault = { kind, provider: pick(r, CLOUD_PROVIDERS), shape: pick(r, INVENTORY_SHAPES), downMs: between(r, 5500, 8000) };
    else fault = { kind, provider: pick(r, CLOUD_PROVIDERS), downMs: between(r, 1000, 5000) };
    const last = out.at(-1);
    const overlaps = last !== undefined && r() < 1 / 3;
    const lastDown = last && 'downMs' in last.fault ? last.fault.downMs : 0;
    // An overlapping fault begins somewhere inside the previous one.
    const start = overlaps && last ? last.atMs + Math.round(r() * lastDown) : at;
    out.push({ atMs: start, fault, overlaps });
    at = Math.max(at, start + ('downMs' in fault ? fault.downMs : 0) + between(r, ...gapMs));
  }
  return out;
}

export function describeFault(f: Fault): string {
  switch (f.kind) {
    case 'sigkill':
      return `SIGKILL ${f.role}, restarted after ${f.downMs} ms`;
    case 'sigstop':
      return `SIGSTOP ${f.role} for ${f.downMs} ms`;
    case 'redis-restart':
      return `SIGKILL redis-server, restarted on its AOF after ${f.downMs} ms`;
    case 'local-proxy-kill':
      return 'SIGKILL a local proxy process';
    case 'inventory-malformed':
      return `${f.provider}'s instance listing answered ${f.shape === 'no-items' ? 'without items' : f.shape === 'garbage' ? 'with garbage items' : 'with a page token that repeats'} for ${f.downMs} ms`;
    default:
      return `${f.kind} on ${f.provider} for ${f.downMs} ms`;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Pids of the local forward-proxy processes under `dataDir`, with their instance directories. */
export async function localProxyProcesses(dataDir: string): Promise<{ pid: number; instanceDir: string }[]> {
  const found: { pid: number; instanceDir: string }[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const args = await readFile(`/proc/${pid}/cmdline`, 'utf8').then(
      (t) => t.split('\0'),
      () => [] as string[],
    );
    // A proxy host (serving every local proxy of its data directory) or a proxy process of the earlier model.
    const i = args.findIndex((arg) => isProxyProgram(arg) || isProxyHostProgram(arg));
    const dir = args[i + 1];
    if (i >= 0 && dir?.startsWith(`${dataDir}/`)) found.push({ pid, instanceDir: dir });
  }
  return found;
}

/** Runs one fault to its end (the role restarted, the process continued, the relay passing again). */
export async function runFault(c: ChaosCluster, f: Fault, r: () => number): Promise<string> {
  switch (f.kind) {
    case 'sigkill': {
      const role = c.roles[f.role];
      if (role.stopped) role.proc.child.kill('SIGCONT');
      role.proc.child.kill('SIGKILL');
      await role.proc.exited;
      await sleep(f.downMs);
      // Up means listening (api, publisher) or consuming (workers); waiting for that keeps one fault at a time.
      await c.restart(f.role);
      return describeFault(f);
    }
    case 'sigstop': {
      const role = c.roles[f.role];
      role.stopped = true;
      role.proc.child.kill('SIGSTOP');
      await sleep(f.downMs);
      role.proc.child.kill('SIGCONT');
      role.stopped = false;
      return describeFault(f);
    }
    case 'redis-restart':
      await c.restartRedis(f.downMs);
      return describeFault(f);
    case 'local-proxy-kill': {
      const procs = await localProxyProcesses(c.dataDir);
      if (procs.length === 0) return 'SIGKILL a local proxy process (none was running)';
      const victim = pick(r, procs);
      try {
        process.kill(victim.pid, 'SIGKILL');
      } catch {
        // exited meanwhile
      }
      return `SIGKILL local proxy process ${victim.pid} (${victim.instanceDir.split('/').pop() ?? ''})`;
    }
    case 'inventory-malformed': {
      const fake = f.provider === 'k8s' ? c.kube : c.compute;
      fake.misbehaviour = f.shape === 'repeat-token' ? { repeatPageToken: 'chaos-stuck-page' } : { listShape: f.shape };
      await sleep(f.downMs);
      fake.misbehaviour = {};
      return describeFault(f);
    }
    default: {
      const relay = c.relays[f.provider];
      relay.setMode(f.kind === 'provider-500' ? 'error' : f.kind === 'provider-hang' ? 'hang' : 'cut');
      await sleep(f.downMs);
      relay.setMode('pass');
      return describeFault(f);
    }
  }
}

/** Plays `schedule` against the cluster, one fault at a time, recording the timeline. Resolves when the last fault is over. */
export async function playFaults(
  c: ChaosCluster,
  schedule: readonly ScheduledFault[],
  seed: number,
  timeline: TimelineEntry[],
  t0: number,
  log: (line: string) => void,
): Promise<void> {
  const r = rng(seed ^ 0xfa17);
  const busy = new Map<string, Promise<void>>();
  let previous: Promise<void> = Promise.resolve();
  for (const [i, { atMs, fault, overlaps }] of schedule.entries()) {
    if (!overlaps) await previous;
    const wait = t0 + atMs - Date.now();
    if (wait > 0) await sleep(wait);
    const target = targetOf(fault);
    const before = busy.get(target) ?? Promise.resolve();
    const run = before.then(async () => {
      const start = Date.now() - t0;
      const what = await runFault(c, fault, r);
      const entry = { atMs: start, untilMs: Date.now() - t0, what: overlaps ? `${what} (overlapping)` : what };
      timeline.push(entry);
      log(`fault ${i + 1}/${schedule.length} at ${entry.atMs} ms: ${entry.what} (over at ${entry.untilMs} ms)`);
    });
    busy.set(target, run);
    previous = run;
  }
  await Promise.all(busy.values());
}
