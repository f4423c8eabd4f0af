/**
 * Entry point of the proxy host: one detached process serving every local proxy of a data
 * directory, run by the local lifecycle as `node <dataDir>/bin/proxy-host.cjs <dataDir> --policy FILE`
 * (this file, bundled by proxy-program.ts).
 *
 * Each proxy is its own listener on 127.0.0.1 with its own credentials, its own source address
 * (`sourceAddresses`) and its own denial counts, all under the one egress policy the host watches.
 * The worker drives it through a Unix socket, `<dataDir>/host/control.sock` (mode 0600 in a 0700
 * directory), speaking HTTP:
 *
 * - `GET /status` → `{pid, startedAt, proxies}`; `GET /status?names=1` adds `names`, the proxies it serves
 * - `PUT /proxies/<name>` → starts the proxy from its instance directory (the previous port when
 *   free), or re-reads its credentials when it runs; answers its `instance.json` record. A front of an
 *   `upstream` provider gets its upstream proxy in the body, `{"upstream": ChainHop}` (kept in memory only).
 * - `DELETE /proxies/<name>` → closes its listener and connections; answers once the port is closed.
 *
 * At start it serves every instance of the data directory (a restarted host brings its proxies
 * back on their ports), except those being deleted and those a per-instance proxy process of the
 * earlier model still serves. At most one host runs per data directory: a second one exits at
 * once (the one `host.json` names, else the lower pid, wins). It exits when its last proxy is
 * deleted, or when it has served nothing for a while after starting. SIGTERM closes everything.
 *
 * Connections use every core: the host forks relay processes (`--relays N`, default one per core
 * beyond the first; host-relays.ts) and hands each the listening socket of every proxy, so the
 * kernel spreads new connections over the host and its relays. The same program runs a relay
 * when its first argument is `--relay` (relay-process.ts).
 *
 * Each proxy's traffic is counted by destination domain (traffic-stats.ts; `--traffic-domains N`
 * distinct domains per proxy, default 100; 0 turns the accounting off, for the data-plane bench).
 */
import { readdir, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { startLivePolicy, type LivePolicy } from '../../egress/live-policy.ts';
import { createLogger, type Logger } from '../../logging.ts';
import { raiseOpenFilesLimit } from '../../open-files.ts';
import { controlHandler, listenControl, type HostState } from './host-control.ts';
import { exists, HostedProxies } from './host-proxies.ts';
import { HostRelays } from './host-relays.ts';
import {
  asHostRecord,
  asInstance,
  asIntent,
  DELETING_FILE,
  HOST_FILE,
  HOST_SOCKET,
  hostDir,
  INSTANCE_FILE,
  instanceDir,
  instancesDir,
  INTENT_FILE,
  readJson,
  writeJsonAtomic,
} from './instance-files.ts';
import { findHostProcesses, isProxyProcess } from './process-table.ts';
import { runRelay } from './relay-process.ts';
import { DEFAULT_TRAFFIC_DOMAINS, MAX_TRAFFIC_DOMAINS } from './traffic-stats.ts';

const EXIT_DUPLICATE = 0;
const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
/** A host that has served nothing this long (since it started, or since its last proxy went) exits. */
const IDLE_AT_START_MS = 3_000;
/** Proxies started at once when the host starts. */
const BOOT_CONCURRENCY = 32;

/**
 * Client connections each proxy's listener holds at once: an eighth of the open-files limit (each
 * proxied connection costs two descriptors, so one flooded port takes at most a quarter), from 16
 * to 1024. A flood at one proxy's port cannot starve the others.
 */
function perProxyConnections(openFiles: number | undefined): number {
  if (openFiles === undefined || !Number.isFinite(openFiles)) return 1024;
  return Math.max(16, Math.min(1024, Math.floor(openFiles / 8)));
}

/** Relay processes when `--relays` is not given: one per core beyond the first, at most 7. */
function defaultRelays(): number {
  return Math.max(0, Math.min(7, availableParallelism() - 1));
}

/** `<dataDir> --policy FILE [--relays N] [--traffic-domains N]`, or the usage and exit 2. */
function parseArgs(argv: readonly string[]): { dataDir: string; policyFile: string | undefined; relays: number; trafficDomains: number } {
  const dataDir = argv[2];
  const usage = (): never => {
    process.stderr.write('usage: proxy-host <dataDir> --policy FILE [--relays N (0-64)] [--traffic-domains N (0-10000, 0: no traffic accounting)]\n');
    process.exit(2);
  };
  if (dataDir === undefined || dataDir.startsWith('--')) usage();
  const at = argv.indexOf('--policy');
  const r = argv.indexOf('--relays');
  const relays = r > 0 ? Number(argv[r + 1]) : defaultRelays();
  if (!Number.isInteger(relays) || relays < 0 || relays > 64) usage();
  const t = argv.indexOf('--traffic-domains');
  const trafficDomains = t > 0 ? Number(argv[t + 1]) : DEFAULT_TRAFFIC_DOMAINS;
  if (!Number.isInteger(trafficDomains) || trafficDomains < 0 || trafficDomains > MAX_TRAFFIC_DOMAINS) usage();
  return { dataDir: dataDir as string, policyFile: at > 0 ? argv[at + 1] : undefined, relays, trafficDomains };
}

/** At most one host per data directory: defer to the one host.json names, else to any older (lower) pid. */
async function exitIfAnotherHostServes(dataDir: string, hostFile: string, logger: Logger): Promise<void> {
  const established = asHostRecord(await readJson(hostFile).catch(() => undefined))?.pid;
  const others = (await findHostProcesses(dataDir)).filter((pid) => pid !== process.pid && (pid === established || pid < process.pid));
  if (others.length > 0) {
    logger.info({ others }, 'another proxy host already serves this data directory; exiting');
    process.exit(EXIT_DUPLICATE);
  }
}

/**
 * The host's exit when it has nothing to do: nothing served and nothing in progress for
 * IDLE_AT_START_MS, from its start and again whenever it becomes idle, unless a request comes.
 * The last-delete rule alone missed a host whose ensures failed, or whose last deletes overlapped
 * (each saw the other's lock): it served nothing and ran on (a chaos run found one left behind).
 */
class IdleExit {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly idle: () => boolean,
    private readonly exit: (reason: string) => void,
  ) {}

  arm(reason: string): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.idle()) this.exit(reason);
    }, IDLE_AT_START_MS);
  }

  /** A request came: no exit until the host is idle again. */
  busy(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Idle now (and no exit pending): exit after the grace unless a request comes. */
  exitWhenIdle(): void {
    if (!this.timer && this.idle()) this.arm('nothing left to serve');
  }
}

/** Brings back every proxy of the data directory on its port, but those being deleted and those a proxy process of the earlier model still serves. */
async function restoreProxies(dataDir: string, proxies: HostedProxies, idle: IdleExit, logger: Logger): Promise<void> {
  const names = await readdir(instancesDir(dataDir), { withFileTypes: true }).then(
    (entries) => entries.filter((e) => e.isDirectory()).map((e) => e.name),
    () => [] as string[],
  );
  const queue = names.filter((n) => NAME_PATTERN.test(n));
  let restored = 0;
  const restoreOne = async (name: string): Promise<void> => {
    const idir = instanceDir(dataDir, name);
    const record = asInstance(await readJson(join(idir, INSTANCE_FILE)).catch(() => undefined));
    // Still served by a proxy process of the earlier model: it keeps it until it exits or is deleted.
    if (record && record.host !== true && (await isProxyProcess(record.pid, idir))) return;
    if (await exists(join(idir, DELETING_FILE))) return;
    const intent = asIntent(await readJson(join(idir, INTENT_FILE)).catch(() => undefined));
    // A front of an upstream provider comes back with the worker's next ensure, which brings its upstream.
    if (!intent || intent.upstream !== undefined) return;
    idle.busy();
    await proxies.ensure(name).then(
      () => restored++,
      (err: unknown) => logger.warn({ instance: name, err: (err as Error).message }, 'could not restore proxy'),
    );
  };
  await Promise.all(
    Array.from({ length: BOOT_CONCURRENCY }, async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) await restoreOne(name);
    }),
  );
  if (restored > 0) logger.info({ restored }, 'proxies restored');
}

async function main(): Promise<void> {
  if (process.argv[2] === '--relay') return runRelay(process.argv);
  const { dataDir, policyFile, relays: relayCount, trafficDomains } = parseArgs(process.argv);
  const logger = createLogger({ level: 'info', destination: pino.destination(1) }).child({ dataDir });
  const dir = hostDir(dataDir);
  const hostFile = join(dir, HOST_FILE);
  const socket = join(dir, HOST_SOCKET);
  await exitIfAnotherHostServes(dataDir, hostFile, logger);

  const openFiles = await raiseOpenFilesLimit(logger);
  const maxConnections = perProxyConnections(openFiles);
  const relays = new HostRelays({
    count: relayCount,
    program: process.argv[1] ?? '',
    dataDir,
    policyFile,
    logger,
    onDenied: (name, counts) => proxies.countDenials(name, counts),
    onTraffic: (name, domains) => proxies.countTraffic(name, domains),
  });
  const policy: LivePolicy = await startLivePolicy({
    ...(policyFile ? { file: policyFile } : {}),
    logger: logger.child({ component: 'egress-policy' }),
    onDocument: () => void relays.reloadPolicy(),
  });
  const proxies: HostedProxies = new HostedProxies({ dataDir, logger, policy, maxConnections, openFilesLimit: openFiles ?? NaN, relays, trafficDomains });
  const startedAt = new Date().toISOString();
  const state: HostState = { closing: false };
  let control: Server | undefined = undefined;

  const shutdown = async (reason: string): Promise<never> => {
    state.closing = true;
    logger.info({ reason, proxies: proxies.size }, 'proxy host stopping');
    policy.close();
    control?.close();
    await proxies.stopAll();
    relays.stopAll();
    // Only our own record: a successor may already have written its own.
    const record = asHostRecord(await readJson(hostFile).catch(() => undefined));
    if (record?.pid === process.pid) await rm(hostFile, { force: true });
    process.exit(0);
  };
  const idle = new IdleExit(
    () => !state.closing && proxies.size === 0 && proxies.inProgress === 0,
    (reason) => void shutdown(reason),
  );
  idle.arm('nothing to serve since it started');

  const handle = controlHandler({ proxies, startedAt, state, busy: () => idle.busy(), shutdown: (reason) => void shutdown(reason) });
  control = await listenControl(dir, socket, handle, logger, () => idle.exitWhenIdle());
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGHUP', () => void policy.reload());

  await writeJsonAtomic(hostFile, { pid: process.pid, startedAt, socket });
  logger.info(
    { pid: process.pid, socket, openFiles, maxConnectionsPerProxy: maxConnections, policyLoaded: policy.loaded, relays: relayCount },
    'proxy host listening',
  );
  await relays.start();
  await restoreProxies(dataDir, proxies, idle, logger);
  idle.exitWhenIdle();
}

main().catch((err: unknown) => {
  process.stderr.write(`proxy host failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
