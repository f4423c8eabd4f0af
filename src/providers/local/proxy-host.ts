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
 *   free), or re-reads its credentials when it runs; answers its `instance.json` record.
 * - `DELETE /proxies/<name>` → closes its listener and connections; answers once the port is closed.
 *
 * At start it serves every instance of the data directory (a restarted host brings its proxies
 * back on their ports), except those being deleted and those a per-instance proxy process of the
 * earlier model still serves. At most one host runs per data directory: a second one exits at
 * once (the one `host.json` names, else the lower pid, wins). It exits when its last proxy is
 * deleted, or when it has served nothing for a while after starting. SIGTERM closes everything.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { chmod, mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import type { Server } from 'proxy-chain';
import { startLivePolicy, type LivePolicy } from '../../egress/live-policy.ts';
import { createLogger } from '../../logging.ts';
import { raiseOpenFilesLimit } from '../../open-files.ts';
import type { ProxyCredentials } from '../lifecycle.ts';
import { createDenialRecorder, type DenialRecorder } from './denial-stats.ts';
import {
  asCredentials,
  asHostRecord,
  asInstance,
  asIntent,
  CREDENTIALS_FILE,
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
  type InstanceRecord,
} from './instance-files.ts';
import { findHostProcesses, isProxyProcess } from './process-table.ts';
import { credentialCheck, listenProxy } from './proxy-server.ts';

const EXIT_DUPLICATE = 0;
const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
/** A host that has served nothing this long (since it started, or since its last proxy went) exits. */
const IDLE_AT_START_MS = 3_000;
/** Proxies started at once when the host starts. */
const BOOT_CONCURRENCY = 32;

interface Served {
  server: Server;
  record: InstanceRecord;
  denials: DenialRecorder;
  /** What the proxy's credential check reads: replaced when they rotate. */
  auth: { credentials: ProxyCredentials };
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Client connections each proxy's listener holds at once: an eighth of the open-files limit (each
 * proxied connection costs two descriptors, so one flooded port takes at most a quarter), from 16
 * to 1024. A flood at one proxy's port cannot starve the others.
 */
function perProxyConnections(openFiles: number | undefined): number {
  if (openFiles === undefined || !Number.isFinite(openFiles)) return 1024;
  return Math.max(16, Math.min(1024, Math.floor(openFiles / 8)));
}

async function main(): Promise<void> {
  const dataDir = process.argv[2];
  if (dataDir === undefined || dataDir.startsWith('--')) {
    process.stderr.write('usage: proxy-host <dataDir> --policy FILE\n');
    process.exit(2);
  }
  const at = process.argv.indexOf('--policy');
  const policyFile = at > 0 ? process.argv[at + 1] : undefined;
  const logger = createLogger({ level: 'info', destination: pino.destination(1) }).child({ dataDir });
  const dir = hostDir(dataDir);
  const hostFile = join(dir, HOST_FILE);
  const socket = join(dir, HOST_SOCKET);

  // At most one host per data directory: defer to the one host.json names, else to any older (lower) pid.
  const established = asHostRecord(await readJson(hostFile).catch(() => undefined))?.pid;
  const others = (await findHostProcesses(dataDir)).filter((pid) => pid !== process.pid && (pid === established || pid < process.pid));
  if (others.length > 0) {
    logger.info({ others }, 'another proxy host already serves this data directory; exiting');
    process.exit(EXIT_DUPLICATE);
  }

  const openFiles = await raiseOpenFilesLimit(logger);
  const fdLimit = openFiles ?? NaN;
  const maxConnections = perProxyConnections(openFiles);
  let warnedFds = false;
  const policy: LivePolicy = await startLivePolicy({ ...(policyFile ? { file: policyFile } : {}), logger: logger.child({ component: 'egress-policy' }) });
  const startedAt = new Date().toISOString();
  const served = new Map<string, Served>();
  const guarded = new Set<number>();
  let closing = false;

  /** Serialises the work on one proxy name. */
  const locks = new Map<string, Promise<unknown>>();
  function withLock<T>(name: string, run: () => Promise<T>): Promise<T> {
    const previous = locks.get(name) ?? Promise.resolve();
    const next = previous.then(run, run);
    const settled = next.catch(() => undefined);
    locks.set(name, settled);
    void settled.then(() => {
      if (locks.get(name) === settled) locks.delete(name);
    });
    return next;
  }

  async function start(name: string): Promise<InstanceRecord> {
    const idir = instanceDir(dataDir!, name);
    const intent = asIntent(await readJson(join(idir, INTENT_FILE)));
    const credentials = asCredentials(await readJson(join(idir, CREDENTIALS_FILE)));
    if (!intent || intent.name !== name || !credentials) throw new HttpError(409, `instance ${name} has no intent.json or credentials.json`);
    if (await exists(join(idir, DELETING_FILE))) throw new HttpError(409, `instance ${name} is being deleted`);
    const previous = asInstance(await readJson(join(idir, INSTANCE_FILE)).catch(() => undefined));
    const log = logger.child({ instance: name });
    const proxyStartedAt = new Date().toISOString();
    const denials = createDenialRecorder(idir, { pid: process.pid, startedAt: proxyStartedAt }, log);
    const auth = { credentials };
    const check = credentialCheck(() => auth.credentials);
    const listen = (port: number): Promise<Server> =>
      listenProxy({
        host: '127.0.0.1',
        port,
        check,
        egress: { policy, denials, logger: log },
        maxConnections,
        ...(intent.sourceAddress ? { localAddress: intent.sourceAddress } : {}),
      });
    let server: Server;
    try {
      server = await listen(previous?.port ?? 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || !previous) throw err;
      log.info({ port: previous.port }, 'previous port is taken; listening on a new one');
      server = await listen(0);
    }
    if (!guarded.has(server.port)) {
      // Its own listeners too: with loopback allowed, a client could otherwise loop a proxy through the host.
      guarded.add(server.port);
      await policy.guard({ host: '127.0.0.1', port: server.port, role: 'proxy' });
    }
    server.on('requestFailed', ({ error }: { error: Error }) => log.warn({ err: error.message }, 'proxied request failed'));
    const record: InstanceRecord = { ...intent, pid: process.pid, port: server.port, startedAt: proxyStartedAt, host: true };
    served.set(name, { server, record, denials, auth });
    // Each proxy holds a listener and, while in use, two sockets per connection: warn well before running out.
    if (!warnedFds && Number.isFinite(fdLimit) && served.size * 4 > fdLimit) {
      warnedFds = true;
      logger.warn(
        { proxies: served.size, openFilesLimit: fdLimit },
        'the open-files limit is low for this many proxies: raise the hard limit (LimitNOFILE, ulimit -Hn) of the worker that starts the host',
      );
    }
    await writeJsonAtomic(join(idir, INSTANCE_FILE), record);
    // A deletion that began while this one started (it found no listener to stop): honour it.
    if (!(await exists(join(idir, INTENT_FILE))) || (await exists(join(idir, DELETING_FILE)))) {
      await stop(name);
      throw new HttpError(409, `instance ${name} was deleted while it started`);
    }
    log.info({ port: server.port, sourceAddress: intent.sourceAddress }, 'proxy listening');
    return record;
  }

  async function stop(name: string): Promise<boolean> {
    const s = served.get(name);
    if (!s) return false;
    served.delete(name);
    await Promise.all([s.server.close(true), s.denials.flush()]);
    logger.info({ instance: name, port: s.record.port }, 'proxy stopped');
    return true;
  }

  function ensure(name: string): Promise<InstanceRecord> {
    return withLock(name, async () => {
      const s = served.get(name);
      if (!s) return start(name);
      const next = asCredentials(await readJson(join(instanceDir(dataDir!, name), CREDENTIALS_FILE)));
      if (next && (next.username !== s.auth.credentials.username || next.password !== s.auth.credentials.password)) {
        s.auth.credentials = next;
        logger.info({ instance: name }, 'credentials reloaded');
      }
      return s.record;
    });
  }

  async function shutdown(reason: string, code: number): Promise<never> {
    closing = true;
    logger.info({ reason, proxies: served.size }, 'proxy host stopping');
    policy.close();
    control.close();
    await Promise.allSettled([...served.keys()].map((name) => stop(name)));
    // Only our own record: a successor may already have written its own.
    const record = asHostRecord(await readJson(hostFile).catch(() => undefined));
    if (record?.pid === process.pid) await rm(hostFile, { force: true });
    process.exit(code);
  }

  let idleTimer: NodeJS.Timeout | undefined = setTimeout(() => {
    idleTimer = undefined;
    if (served.size === 0 && locks.size === 0) void shutdown('nothing to serve since it started', 0);
  }, IDLE_AT_START_MS);
  const busy = (): void => {
    if (idleTimer) clearTimeout(idleTimer);
    idleTimer = undefined;
  };
  /**
   * Nothing served and nothing in progress: exit after the same grace unless a request comes. The
   * last-delete rule alone missed a host whose ensures failed, or whose last deletes overlapped
   * (each saw the other's lock): it served nothing and ran on (a chaos run found one left behind).
   */
  const exitWhenIdle = (): void => {
    if (closing || idleTimer || served.size > 0 || locks.size > 0) return;
    idleTimer = setTimeout(() => {
      idleTimer = undefined;
      if (!closing && served.size === 0 && locks.size === 0) void shutdown('nothing left to serve', 0);
    }, IDLE_AT_START_MS);
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const reply = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    req.resume();
    if (closing) return reply(503, { error: 'the proxy host is stopping' });
    const url = req.url ?? '';
    if (req.method === 'GET' && url === '/status') return reply(200, { pid: process.pid, startedAt, proxies: served.size });
    if (req.method === 'GET' && url === '/status?names=1') return reply(200, { pid: process.pid, startedAt, proxies: served.size, names: [...served.keys()] });
    const match = /^\/proxies\/([^/]+)$/.exec(url);
    const name = match?.[1];
    if (!name || !NAME_PATTERN.test(name)) return reply(404, { error: 'no such route' });
    busy();
    try {
      if (req.method === 'PUT') return reply(200, await ensure(name));
      if (req.method === 'DELETE') {
        const stopped = await withLock(name, () => stop(name));
        const remaining = served.size;
        // The last proxy gone: the host goes too (a worker starts one again for the next proxy).
        if (remaining === 0 && locks.size <= 1) closing = true;
        reply(200, { stopped, remaining });
        if (closing) res.once('finish', () => void shutdown('its last proxy was deleted', 0));
        return;
      }
      return reply(405, { error: 'method not allowed' });
    } catch (err) {
      const status = err instanceof HttpError ? err.status : 500;
      return reply(status, { error: (err as Error).message });
    }
  }

  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  // A socket left by a host that was killed: no host runs for this directory (checked above).
  await rm(socket, { force: true });
  const control = createServer((req, res) => {
    handle(req, res)
      .catch((err: unknown) => {
        logger.error({ err: (err as Error).message }, 'control request failed');
        if (!res.headersSent) res.writeHead(500).end();
      })
      .finally(exitWhenIdle);
  });
  control.headersTimeout = 10_000;
  control.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    control.once('error', reject);
    control.listen(socket, () => resolve());
  });
  await chmod(socket, 0o600);

  process.on('SIGTERM', () => void shutdown('SIGTERM', 0));
  process.on('SIGINT', () => void shutdown('SIGINT', 0));
  process.on('SIGHUP', () => void policy.reload());

  await writeJsonAtomic(hostFile, { pid: process.pid, startedAt, socket });
  logger.info({ pid: process.pid, socket, openFiles, maxConnectionsPerProxy: maxConnections, policyLoaded: policy.loaded }, 'proxy host listening');

  // Bring back every proxy of the data directory, on its port.
  const names = await readdir(instancesDir(dataDir), { withFileTypes: true }).then(
    (entries) => entries.filter((e) => e.isDirectory()).map((e) => e.name),
    () => [] as string[],
  );
  const queue = names.filter((n) => NAME_PATTERN.test(n));
  let restored = 0;
  const bootOne = async (name: string): Promise<void> => {
    const idir = instanceDir(dataDir, name);
    const record = asInstance(await readJson(join(idir, INSTANCE_FILE)).catch(() => undefined));
    // Still served by a proxy process of the earlier model: it keeps it until it exits or is deleted.
    if (record && record.host !== true && (await isProxyProcess(record.pid, idir))) return;
    if (await exists(join(idir, DELETING_FILE))) return;
    if (!asIntent(await readJson(join(idir, INTENT_FILE)).catch(() => undefined))) return;
    busy();
    await ensure(name).then(
      () => restored++,
      (err: unknown) => logger.warn({ instance: name, err: (err as Error).message }, 'could not restore proxy'),
    );
  };
  await Promise.all(
    Array.from({ length: BOOT_CONCURRENCY }, async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) await bootOne(name);
    }),
  );
  if (restored > 0) logger.info({ restored }, 'proxies restored');
  exitWhenIdle();
}

main().catch((err: unknown) => {
  process.stderr.write(`proxy host failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
