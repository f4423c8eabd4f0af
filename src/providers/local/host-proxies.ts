/**
 * The proxies one proxy host serves (proxy-host.ts): each a listener on 127.0.0.1 started from its
 * instance directory, with its own credentials, source address, denial and traffic counts, under the host's
 * one egress policy. Every start, credential reload and stop of a name is serialised (NameLocks).
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ForwardProxy } from '../../forward-proxy/server.ts';
import type { LivePolicy } from '../../egress/live-policy.ts';
import type { Logger } from '../../logging.ts';
import { createDenialRecorder, type DenialRecorder } from './denial-stats.ts';
import { createUpstreamStatsRecorder, type UpstreamStatsRecorder } from './upstream-stats.ts';
import { asDomainTraffic, createTrafficRecorder, type TrafficRecorder } from './traffic-stats.ts';
import {
  asCredentials,
  asInstance,
  asIntent,
  CREDENTIALS_FILE,
  DELETING_FILE,
  INSTANCE_FILE,
  instanceDir,
  INTENT_FILE,
  readJson,
  writeJsonAtomic,
  type InstanceRecord,
} from './instance-files.ts';
import type { HostRelays } from './host-relays.ts';
import { NameLocks } from './name-locks.ts';
import { credentialCheck, listenProxy } from './proxy-server.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';
import { sameHop, type ChainHop } from '../../forward-proxy/chain-hop.ts';

/** A control request refused with an HTTP status (409: the instance cannot be served as it is). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

interface Served {
  server: ForwardProxy;
  record: InstanceRecord;
  denials: DenialRecorder;
  /** What the proxy's credential check reads: replaced when they rotate. */
  auth: { credentials: ProxyCredentials };
  /** The upstream proxy a front forwards through (replaced when its route or credentials change); none for a plain proxy. */
  route: { hop?: ChainHop };
  upstreamStats?: UpstreamStatsRecorder;
  traffic?: TrafficRecorder;
}

export interface HostedProxiesOptions {
  dataDir: string;
  logger: Logger;
  policy: LivePolicy;
  /** Client connections each proxy's listener holds at once. */
  maxConnections: number;
  /** The process's open-files limit (NaN: unknown), for the warning when it is low for the proxies served. */
  openFilesLimit: number;
  /** The relay processes that accept each proxy's connections too (none: the host alone). */
  relays?: HostRelays;
  /** Distinct destination domains each proxy's traffic is counted by (traffic-stats.ts); 0: accounting is off. */
  trafficDomains: number;
}

export async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

export class HostedProxies {
  private readonly served = new Map<string, Served>();
  /** Proxies being stopped, until their relays have stopped them too. */
  private readonly stopping = new Map<string, Served>();
  /** The ports the egress policy already guards (a new listener on an old port is not guarded twice). */
  private readonly guarded = new Set<number>();
  private readonly locks = new NameLocks();
  private warnedFds = false;

  constructor(private readonly options: HostedProxiesOptions) {}

  /** Proxies served. */
  get size(): number {
    return this.served.size;
  }

  /** Names with a start, reload or stop running or queued. */
  get inProgress(): number {
    return this.locks.size;
  }

  names(): string[] {
    return [...this.served.keys()];
  }

  /**
   * Starts the proxy (on its previous port when free), or re-reads its credentials when it runs; answers its record.
   * `hop`: the upstream proxy of a front (an `upstream` provider's instance), given by the worker over the
   * control socket only (never written to a file); a front whose intent names an upstream is not started without it.
   */
  ensure(name: string, hop?: ChainHop): Promise<InstanceRecord> {
    return this.locks.run(name, async () => {
      const s = this.served.get(name);
      if (!s) return this.start(name, hop);
      if (hop && !sameHop(hop, s.route.hop)) {
        s.route.hop = hop;
        this.options.logger.info({ instance: name, upstream: `${hop.scheme}://${hop.host}:${hop.port}` }, 'upstream route updated');
      }
      const next = asCredentials(await readJson(join(instanceDir(this.options.dataDir, name), CREDENTIALS_FILE)));
      if (next && (next.username !== s.auth.credentials.username || next.password !== s.auth.credentials.password)) {
        s.auth.credentials = next;
        await this.options.relays?.rotate(name, next);
        this.options.logger.info({ instance: name }, 'credentials reloaded');
      }
      return s.record;
    });
  }

  /** Closes the proxy's listener and connections, after whatever runs on its name; false when it was not served. */
  remove(name: string): Promise<boolean> {
    return this.locks.run(name, () => this.stop(name));
  }

  private countsOf(name: string): Served | undefined {
    return this.served.get(name) ?? this.stopping.get(name);
  }

  /** Refusals a relay counted for `name`, added to the proxy's own. */
  countDenials(name: string, counts: Record<string, number>): void {
    const denials = this.countsOf(name)?.denials;
    if (!denials) return;
    for (const [reason, n] of Object.entries(counts)) denials.record(reason, n);
  }

  /** Traffic a relay counted for `name`, added to the proxy's own. */
  countTraffic(name: string, domains: unknown): void {
    const traffic = this.countsOf(name)?.traffic;
    const counts = asDomainTraffic(domains);
    if (traffic && counts) traffic.add(counts);
  }

  /** Stops every proxy at once (the host is going). */
  async stopAll(): Promise<void> {
    await Promise.allSettled(this.names().map((name) => this.stop(name)));
  }

  private async start(name: string, hop: ChainHop | undefined): Promise<InstanceRecord> {
    const { dataDir, logger, policy, maxConnections } = this.options;
    const idir = instanceDir(dataDir, name);
    const intent = asIntent(await readJson(join(idir, INTENT_FILE)));
    const credentials = asCredentials(await readJson(join(idir, CREDENTIALS_FILE)));
    if (!intent || intent.name !== name || !credentials) throw new HttpError(409, `instance ${name} has no intent.json or credentials.json`);
    if (await exists(join(idir, DELETING_FILE))) throw new HttpError(409, `instance ${name} is being deleted`);
    // A front never goes out on its own: without its upstream (a restarted host) it waits for the worker's next ensure.
    if (intent.upstream !== undefined && !hop) throw new HttpError(409, `instance ${name} forwards to an upstream proxy the worker has not given yet`);
    const route: { hop?: ChainHop } = hop ? { hop } : {};
    const upstreamStats = hop
      ? createUpstreamStatsRecorder(idir, { pid: process.pid, startedAt: new Date().toISOString() }, logger.child({ instance: name }))
      : undefined;
    const previous = asInstance(await readJson(join(idir, INSTANCE_FILE)).catch(() => undefined));
    const log = logger.child({ instance: name });
    const proxyStartedAt = new Date().toISOString();
    const identity = { pid: process.pid, startedAt: proxyStartedAt };
    const denials = createDenialRecorder(idir, identity, log);
    const { trafficDomains } = this.options;
    const traffic = trafficDomains > 0 ? createTrafficRecorder(idir, identity, log, trafficDomains) : undefined;
    const auth = { credentials };
    const check = credentialCheck(() => auth.credentials);
    const listen = (port: number): Promise<ForwardProxy> =>
      listenProxy({
        host: '127.0.0.1',
        port,
        check,
        egress: { policy, denials, logger: log },
        maxConnections,
        ...(traffic ? { traffic } : {}),
        ...(intent.sourceAddress ? { localAddress: intent.sourceAddress } : {}),
        ...(hop ? { chain: () => route.hop, ...(upstreamStats ? { upstreamStats } : {}) } : {}),
      });
    let server: ForwardProxy;
    try {
      server = await listen(previous?.port ?? 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || !previous) throw err;
      log.info({ port: previous.port }, 'previous port is taken; listening on a new one');
      server = await listen(0);
    }
    if (!this.guarded.has(server.port)) {
      // Its own listeners too: with loopback allowed, a client could otherwise loop a proxy through the host.
      this.guarded.add(server.port);
      await policy.guard({ host: '127.0.0.1', port: server.port, role: 'proxy' });
    }
    const record: InstanceRecord = { ...intent, pid: process.pid, port: server.port, startedAt: proxyStartedAt, host: true };
    this.served.set(name, { server, record, denials, auth, route, ...(upstreamStats ? { upstreamStats } : {}), ...(traffic ? { traffic } : {}) });
    // Fronts are served by the host alone: the relays are never told an upstream's credentials.
    if (!hop)
      await this.options.relays?.serve(server.server, {
        name,
        port: server.port,
        credentials,
        maxConnections,
        trafficDomains,
        ...(intent.sourceAddress ? { localAddress: intent.sourceAddress } : {}),
      });
    this.warnWhenFdsLow();
    await writeJsonAtomic(join(idir, INSTANCE_FILE), record);
    // A deletion that began while this one started (it found no listener to stop): honour it.
    if (!(await exists(join(idir, INTENT_FILE))) || (await exists(join(idir, DELETING_FILE)))) {
      await this.stop(name);
      throw new HttpError(409, `instance ${name} was deleted while it started`);
    }
    log.info({ port: server.port, sourceAddress: intent.sourceAddress }, 'proxy listening');
    return record;
  }

  /** Each proxy holds a listener and, while in use, two sockets per connection: warn (once) well before running out. */
  private warnWhenFdsLow(): void {
    const limit = this.options.openFilesLimit;
    if (this.warnedFds || !Number.isFinite(limit) || this.served.size * 4 <= limit) return;
    this.warnedFds = true;
    this.options.logger.warn(
      { proxies: this.served.size, openFilesLimit: limit },
      'the open-files limit is low for this many proxies: raise the hard limit (LimitNOFILE, ulimit -Hn) of the worker that starts the host',
    );
  }

  private async stop(name: string): Promise<boolean> {
    const s = this.served.get(name);
    if (!s) return false;
    this.served.delete(name);
    // Counts the relays send while they stop it still count (their last batch comes before their answer).
    this.stopping.set(name, s);
    try {
      await Promise.all([s.server.close(), this.options.relays?.stop(name)]);
    } finally {
      this.stopping.delete(name);
    }
    await Promise.all([s.denials.flush(), s.upstreamStats?.flush(), s.traffic?.flush()]);
    this.options.logger.info({ instance: name, port: s.record.port }, 'proxy stopped');
    return true;
  }
}
