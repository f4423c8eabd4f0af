/**
 * A relay of the proxy host: a process the host forks (`proxy-host.cjs --relay <dataDir> --policy
 * FILE`) so that the proxies' connections use more than one core. The host hands it each proxy's
 * listening socket; the relay accepts from the same socket as the host does (the kernel gives each
 * new connection to one of them) and answers exactly as the host would: the same credentials
 * (rotations are sent along), the same egress policy (read from the same file), the same limits.
 * Its refusals and traffic are counted by the host (sent in batches). It exits when the host goes (its IPC channel closes).
 */
import type { Server as NetServer } from 'node:net';
import { pino } from 'pino';
import { startLivePolicy, type LivePolicy } from '../../egress/live-policy.ts';
import { createForwardProxy, type ForwardProxyCore } from '../../forward-proxy/server.ts';
import { createLogger, type Logger } from '../../logging.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';
import type { DenialRecorder } from './denial-stats.ts';
import { credentialCheck, proxyHandling, type TrafficCounter } from './proxy-server.ts';
import { debouncedOutlet, type StatsOutlet } from './stats-file.ts';
import { DomainTraffic, TRAFFIC_FLUSH_MS } from './traffic-stats.ts';
import { isToRelay, type FromRelay, type ServeMessage, type ToRelay } from './relay-messages.ts';

/** Refusals go to the host at most this often (traffic at most every TRAFFIC_FLUSH_MS). */
const DENIALS_EVERY_MS = 100;

interface Relayed {
  listener: NetServer;
  core: ForwardProxyCore;
  auth: { credentials: ProxyCredentials };
}

function send(message: FromRelay): void {
  if (process.connected) process.send?.(message);
}

/** Counts per proxy, sent to the host shortly after they change (stats-file.ts's outlet) and begun afresh. */
class Batches<T> {
  private pending = new Map<string, T>();
  private readonly outlet: StatsOutlet;

  constructor(
    private readonly begin: () => T,
    send: (name: string, batch: T) => void,
    everyMs: number,
  ) {
    this.outlet = debouncedOutlet(() => {
      const sent = this.pending;
      this.pending = new Map();
      for (const [name, batch] of sent) send(name, batch);
      return Promise.resolve();
    }, everyMs);
  }

  /** `name`'s batch to count into (it goes within `everyMs`). */
  of(name: string): T {
    let batch = this.pending.get(name);
    if (batch === undefined) {
      batch = this.begin();
      this.pending.set(name, batch);
    }
    this.outlet.changed();
    return batch;
  }

  flush(): Promise<void> {
    return this.outlet.flush();
  }
}

class Relay {
  private readonly relayed = new Map<string, Relayed>();
  private readonly guarded = new Set<number>();
  private readonly denials = new Batches<Record<string, number>>(
    () => ({}),
    (name, counts) => send({ type: 'denied', name, counts }),
    DENIALS_EVERY_MS,
  );
  private readonly traffic = new Batches<DomainTraffic>(
    () => new DomainTraffic(this.trafficDomains),
    (name, domains) => send({ type: 'traffic', name, domains: domains.toJSON() }),
    TRAFFIC_FLUSH_MS,
  );
  /** The bound of the proxies' domains, as the host's last `serve` said (the host applies its own again). */
  private trafficDomains = 0;

  constructor(
    private readonly policy: LivePolicy,
    private readonly logger: Logger,
  ) {}

  async handle(message: ToRelay, handle: unknown): Promise<void> {
    if (message.type === 'serve') return this.serve(message, handle as NetServer | undefined);
    if (message.type === 'reload') return this.policy.reload();
    const r = this.relayed.get(message.name);
    if (message.type === 'credentials') {
      if (r) r.auth.credentials = message.credentials;
      return;
    }
    if (!r) return;
    this.relayed.delete(message.name);
    await Promise.all([new Promise<void>((resolve) => r.listener.close(() => resolve())), r.core.close()]);
    await Promise.all([this.denials.flush(), this.traffic.flush()]);
  }

  private async serve(message: ServeMessage, listener: NetServer | undefined): Promise<void> {
    if (!listener || typeof listener.on !== 'function') throw new Error(`no listening socket came with proxy ${message.name}`);
    const previous = this.relayed.get(message.name);
    if (previous) {
      this.relayed.delete(message.name);
      previous.listener.close();
      await previous.core.close();
    }
    if (!this.guarded.has(message.port)) {
      this.guarded.add(message.port);
      await this.policy.guard({ host: '127.0.0.1', port: message.port, role: 'proxy' });
    }
    const auth = { credentials: message.credentials };
    const { name } = message;
    const denials: DenialRecorder = {
      record: (reason, n = 1) => {
        const counts = this.denials.of(name);
        counts[reason] = (counts[reason] ?? 0) + n;
      },
      flush: () => this.denials.flush(),
    };
    this.trafficDomains = message.trafficDomains;
    const traffic: TrafficCounter = { record: (hostname, kind, up, down) => this.traffic.of(name).record(hostname, kind, up, down) };
    const core = createForwardProxy(
      proxyHandling({
        check: credentialCheck(() => auth.credentials),
        egress: { policy: this.policy, denials, logger: this.logger.child({ instance: name }) },
        ...(message.trafficDomains > 0 ? { traffic } : {}),
        maxConnections: message.maxConnections,
        ...(message.localAddress ? { localAddress: message.localAddress } : {}),
      }),
    );
    listener.maxConnections = message.maxConnections;
    listener.on('connection', (socket) => core.server.emit('connection', socket));
    this.relayed.set(message.name, { listener, core, auth });
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.relayed.values()].map((r) => (r.listener.close(), r.core.close())));
    this.relayed.clear();
  }
}

/** The relay's main: `--relay <dataDir> [--policy FILE]`, forked by the host with an IPC channel. */
export async function runRelay(argv: readonly string[]): Promise<void> {
  const dataDir = argv[argv.indexOf('--relay') + 1] ?? '';
  const at = argv.indexOf('--policy');
  const policyFile = at > 0 ? argv[at + 1] : undefined;
  const logger = createLogger({ level: 'info', destination: pino.destination(1) }).child({ dataDir, relay: process.pid });
  if (!process.send) {
    process.stderr.write('a relay is started by the proxy host (it needs the host IPC channel)\n');
    process.exit(2);
  }
  const policy = await startLivePolicy({ ...(policyFile ? { file: policyFile } : {}), logger: logger.child({ component: 'egress-policy' }) });
  const relay = new Relay(policy, logger);
  const stop = (reason: string): void => {
    logger.info({ reason }, 'relay stopping');
    policy.close();
    void relay.closeAll().finally(() => process.exit(0));
  };
  process.on('disconnect', () => stop('the proxy host is gone'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => void policy.reload());
  const carryOut = (message: ToRelay, handle: unknown): Promise<void> =>
    relay.handle(message, handle).then(
      () => send({ type: 'done', id: message.id }),
      (err: unknown) => {
        logger.error({ instance: message.name, err: (err as Error).message }, `relay could not ${message.type}`);
        send({ type: 'done', id: message.id, error: (err as Error).message });
      },
    );
  // One message at a time, in the order sent: a stop that overtook the serve it follows (a serve
  // waits for the policy's guard) would find nothing to stop, and the serve would then keep a
  // deleted proxy's port open in this process.
  let previous: Promise<void> = Promise.resolve();
  process.on('message', (message: unknown, handle: unknown) => {
    if (!isToRelay(message)) return;
    previous = previous.then(() => carryOut(message, handle));
  });
  send({ type: 'done', id: 0 });
  logger.info({ policyLoaded: policy.loaded }, 'relay ready');
}
