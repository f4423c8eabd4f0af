import { join } from 'node:path';
import type { TrafficKind } from '../../forward-proxy/types.ts';
import type { Logger } from '../../logging.ts';
import { addTraffic, emptyTraffic, OTHER_DOMAIN, type TrafficCounts } from '../../model/traffic.ts';
import { asIdentity, statsFileOutlet, type StatsIdentity } from './stats-file.ts';

/**
 * Traffic through a local proxy (docs/usage.md#traffic), counted in the process that serves it
 * (the proxy host and its relays, or a proxy process) and read by the worker (traffic-growth.ts):
 * cumulative counts per destination domain since the proxy started, in
 * `<instanceDir>/traffic-stats.json` (`{pid, startedAt, domains: {domain: TrafficCounts}}`,
 * written atomically within TRAFFIC_FLUSH_MS of a change: stats-file.ts). At most `maxDomains` distinct
 * domains are kept per proxy; traffic to any further one counts under OTHER_DOMAIN.
 * Bundled into the proxy programs: no prom-client here.
 */
export const TRAFFIC_STATS_FILE = 'traffic-stats.json';

/** Distinct destination domains counted per proxy unless the program is told otherwise (`--traffic-domains`). */
export const DEFAULT_TRAFFIC_DOMAINS = 100;
/**
 * Traffic changes all the time a proxy is in use: its file is written (and a relay's counts sent to
 * the host) at most once a second, not at the 100 ms of the rarer refusals; a proxy killed outright
 * loses at most that much of its counts.
 */
export const TRAFFIC_FLUSH_MS = 1_000;

/** The most a program may be told to keep (each costs a few numbers per proxy, in memory and in the file). */
export const MAX_TRAFFIC_DOMAINS = 10_000;

export interface TrafficStats extends StatsIdentity {
  domains: Record<string, TrafficCounts>;
}

function asTrafficCounts(value: unknown): TrafficCounts | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const c = value as Record<string, unknown>;
  const counts = emptyTraffic();
  for (const field of ['bytesUp', 'bytesDown', 'requests', 'tunnels'] as const) {
    const n = c[field];
    if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) return undefined;
    counts[field] = n;
  }
  return counts;
}

/** Per-domain counts from untrusted JSON (a relay's message, a stats file); malformed entries dropped. */
export function asDomainTraffic(value: unknown): Record<string, TrafficCounts> | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const domains: Record<string, TrafficCounts> = {};
  for (const [domain, counts] of Object.entries(value)) {
    const parsed = asTrafficCounts(counts);
    if (parsed) domains[domain] = parsed;
  }
  return domains;
}

export function asTrafficStats(value: unknown): TrafficStats | undefined {
  const identity = asIdentity(value);
  const domains = asDomainTraffic((value as { domains?: unknown } | undefined)?.domains);
  return identity && domains ? { ...identity, domains } : undefined;
}

/** Counts per destination domain (lower case), at most `maxDomains` distinct ones; the rest under OTHER_DOMAIN. */
export class DomainTraffic {
  private readonly counts = new Map<string, TrafficCounts>();

  constructor(private readonly maxDomains: number) {}

  get size(): number {
    return this.counts.size;
  }

  /** The counts `hostname`'s traffic goes to (created when the bound allows, else OTHER_DOMAIN's). */
  private entry(hostname: string): TrafficCounts {
    const domain = hostname.toLowerCase();
    let counts = this.counts.get(domain);
    if (counts === undefined) {
      const kept = domain !== OTHER_DOMAIN ? this.counts.size - (this.counts.has(OTHER_DOMAIN) ? 1 : 0) : 0;
      const key = kept < this.maxDomains ? domain : OTHER_DOMAIN;
      counts = this.counts.get(key) ?? emptyTraffic();
      this.counts.set(key, counts);
    }
    return counts;
  }

  /** One request or tunnel to `hostname` that carried `up` bytes to it and `down` back. */
  record(hostname: string, kind: TrafficKind, up: number, down: number): void {
    const counts = this.entry(hostname);
    counts.bytesUp += up;
    counts.bytesDown += down;
    if (kind === 'request') counts.requests++;
    else counts.tunnels++;
  }

  /** Counts made elsewhere (a relay's), under the same bound. */
  add(domains: Readonly<Record<string, TrafficCounts>>): void {
    for (const [domain, counts] of Object.entries(domains)) addTraffic(this.entry(domain), counts);
  }

  toJSON(): Record<string, TrafficCounts> {
    return Object.fromEntries(this.counts);
  }
}

export interface TrafficRecorder {
  record(hostname: string, kind: TrafficKind, up: number, down: number): void;
  /** Counts a relay made for this proxy since its last message. */
  add(domains: Readonly<Record<string, TrafficCounts>>): void;
  flush(): Promise<void>;
  /** The counts since the proxy started, as its file holds them (and its traffic report answers: traffic-report.ts). */
  stats(): TrafficStats;
}

/** The proxy's side: counts in memory, written to `<dir>/traffic-stats.json` shortly after they change. */
export function createTrafficRecorder(
  dir: string,
  identity: StatsIdentity,
  logger: Logger,
  maxDomains = DEFAULT_TRAFFIC_DOMAINS,
  flushMs = TRAFFIC_FLUSH_MS,
): TrafficRecorder {
  const domains = new DomainTraffic(maxDomains);
  const stats = (): TrafficStats => ({ ...identity, domains: domains.toJSON() });
  const outlet = statsFileOutlet(join(dir, TRAFFIC_STATS_FILE), stats, logger, 'traffic counts', flushMs);
  return {
    record(hostname, kind, up, down) {
      domains.record(hostname, kind, up, down);
      outlet.changed();
    },
    add(more) {
      domains.add(more);
      outlet.changed();
    },
    flush: outlet.flush,
    stats,
  };
}

/**
 * A proxy without an instance directory (the proxy program's container mode: VMs and containers):
 * the same counts, in memory only. The worker reads them through the proxy's traffic report
 * (traffic-report.ts); a restarted proxy counts from zero under a new identity.
 */
export function createMemoryTrafficRecorder(identity: StatsIdentity, maxDomains = DEFAULT_TRAFFIC_DOMAINS): TrafficRecorder {
  const domains = new DomainTraffic(maxDomains);
  return {
    record: (hostname, kind, up, down) => domains.record(hostname, kind, up, down),
    add: (more) => domains.add(more),
    flush: () => Promise.resolve(),
    stats: () => ({ ...identity, domains: domains.toJSON() }),
  };
}
