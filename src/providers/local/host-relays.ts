/**
 * The proxy host's relay processes (relay-process.ts): forked at the host's start, one per core
 * beyond the first unless the provider says otherwise (`proxies.relayProcesses`), each handed
 * every proxy's listening socket so that connections are accepted, and relayed, on every core.
 * Every start, credential rotation and stop is carried out by every live relay before it counts
 * as done (a deleted proxy's port is closed in every process when the delete answers). A relay
 * that exits is started again (after 1 s, doubled for each relay in a row that lived less than a
 * minute, up to 30 s) and handed every proxy anew; one that does not start, or answer, within 10 s
 * is killed (and so started again).
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { Server as NetServer } from 'node:net';
import type { Logger } from '../../logging.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';
import type { TrafficCounts } from '../../model/traffic.ts';
import { isFromRelay, type ServeMessage, type ToRelay } from './relay-messages.ts';

/** How long a relay may take to start, or to carry out one message, before it is killed. */
const ANSWER_TIMEOUT_MS = 10_000;
/** A relay that exited is started again after this long, doubled for each exit in a row up to RESTART_MAX_MS. */
const RESTART_AFTER_MS = 1_000;
const RESTART_MAX_MS = 30_000;
/** A relay that lived this long was not failing: the next restart waits RESTART_AFTER_MS again. */
const HEALTHY_AFTER_MS = 60_000;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Outgoing = DistributiveOmit<ToRelay, 'id'>;

export interface HostRelaysOptions {
  count: number;
  /** The host program (the relay is the same program with `--relay`). */
  program: string;
  dataDir: string;
  policyFile: string | undefined;
  logger: Logger;
  /** Refusals a relay counted for a proxy. */
  onDenied: (name: string, counts: Record<string, number>) => void;
  /** Traffic a relay counted for a proxy, by destination domain. */
  onTraffic: (name: string, domains: Record<string, TrafficCounts>) => void;
}

interface Pending {
  resolve: () => void;
  timer: NodeJS.Timeout;
}

class RelayChild {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  readonly ready: Promise<void>;

  constructor(
    readonly child: ChildProcess,
    private readonly logger: Logger,
    counted: Pick<HostRelaysOptions, 'onDenied' | 'onTraffic'>,
  ) {
    let markReady: () => void = () => undefined;
    this.ready = new Promise((resolve) => (markReady = resolve));
    // One that never says it is ready would hold the host's start (and every ask) for good.
    const startTimer = setTimeout(() => {
      logger.warn({ relay: child.pid }, 'a relay did not start in time; killing it');
      child.kill('SIGKILL');
    }, ANSWER_TIMEOUT_MS);
    void this.ready.then(() => clearTimeout(startTimer));
    child.on('message', (message: unknown) => {
      if (!isFromRelay(message)) return;
      if (message.type === 'denied') return counted.onDenied(message.name, message.counts);
      if (message.type === 'traffic') return counted.onTraffic(message.name, message.domains);
      if (message.id === 0) return markReady();
      const p = this.pending.get(message.id);
      if (!p) return;
      this.pending.delete(message.id);
      clearTimeout(p.timer);
      if (message.error) this.logger.warn({ relay: child.pid, err: message.error }, 'a relay could not carry out a request');
      p.resolve();
    });
    // Gone: nothing it was asked is waited for any more (it serves nothing).
    child.once('exit', () => {
      markReady();
      for (const p of this.pending.values()) {
        clearTimeout(p.timer);
        p.resolve();
      }
      this.pending.clear();
    });
  }

  /** Sends `message` (with `handle`) and resolves once the relay carried it out, or is gone. */
  async ask(message: Outgoing, handle?: NetServer): Promise<void> {
    // Not before it listens for messages: what arrives earlier is lost.
    await this.ready;
    if (!this.child.connected) return;
    const id = this.nextId++;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.logger.warn({ relay: this.child.pid, request: message.type }, 'a relay did not answer in time; killing it');
        this.child.kill('SIGKILL');
      }, ANSWER_TIMEOUT_MS);
      this.pending.set(id, { resolve, timer });
      const full = { ...message, id };
      const sent = (err: Error | null): void => {
        if (err) this.child.kill('SIGKILL');
      };
      if (handle) this.child.send(full, handle, sent);
      else this.child.send(full, sent);
    });
  }
}

export class HostRelays {
  private readonly relays = new Set<RelayChild>();
  /** What every relay must serve: each proxy's socket and what it answers with. */
  private readonly proxies = new Map<string, { handle: NetServer; message: Omit<ServeMessage, 'id' | 'type'> }>();
  private stopping = false;
  /** Relays in a row that exited before HEALTHY_AFTER_MS. */
  private quickExits = 0;

  constructor(private readonly options: HostRelaysOptions) {}

  /** Forks the relays and waits until each is ready. */
  async start(): Promise<void> {
    await Promise.all(Array.from({ length: this.options.count }, () => this.spawn()));
  }

  private async spawn(): Promise<void> {
    const { program, dataDir, policyFile, logger } = this.options;
    const child = fork(program, ['--relay', dataDir, ...(policyFile ? ['--policy', policyFile] : [])], {
      cwd: dataDir,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'json',
    });
    const relay = new RelayChild(child, logger, this.options);
    this.relays.add(relay);
    const startedAt = performance.now();
    child.once('exit', (code, signal) => {
      this.relays.delete(relay);
      if (this.stopping) return;
      // A relay failing at once (again and again) is started again ever more slowly, not once a second for good.
      this.quickExits = performance.now() - startedAt > HEALTHY_AFTER_MS ? 0 : this.quickExits + 1;
      const restartInMs = Math.min(RESTART_AFTER_MS * 2 ** Math.max(0, this.quickExits - 1), RESTART_MAX_MS);
      logger.warn({ relay: child.pid, code, signal, restartInMs }, 'a relay exited; starting another');
      setTimeout(() => void this.spawn(), restartInMs).unref();
    });
    child.once('error', (err) => logger.warn({ relay: child.pid, err: err.message }, 'relay process error'));
    await relay.ready;
    // A replacement is handed every proxy served now.
    await Promise.all([...this.proxies.entries()].map(([, p]) => relay.ask({ type: 'serve', ...p.message }, p.handle)));
  }

  private all(message: Outgoing, handle?: NetServer): Promise<void> {
    return Promise.all([...this.relays].map((r) => r.ask(message, handle))).then(() => undefined);
  }

  /** Every relay accepts from `handle` too, answering as `message` says. */
  serve(handle: NetServer, message: Omit<ServeMessage, 'id' | 'type'>): Promise<void> {
    this.proxies.set(message.name, { handle, message });
    return this.all({ type: 'serve', ...message }, handle);
  }

  rotate(name: string, credentials: ProxyCredentials): Promise<void> {
    const p = this.proxies.get(name);
    if (p) p.message = { ...p.message, credentials };
    return this.all({ type: 'credentials', name, credentials });
  }

  /** Every relay closes its copy of the proxy's socket and its connections. */
  stop(name: string): Promise<void> {
    if (!this.proxies.delete(name)) return Promise.resolve();
    return this.all({ type: 'stop', name });
  }

  /** The host's egress policy changed: every relay reads it again (each also watches the file, later). */
  reloadPolicy(): Promise<void> {
    return this.all({ type: 'reload', name: '' });
  }

  /** Ends the relays (the host is going). */
  stopAll(): void {
    this.stopping = true;
    for (const r of this.relays) r.child.kill('SIGTERM');
  }
}
