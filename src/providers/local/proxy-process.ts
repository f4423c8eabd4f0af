/**
 * Entry point of one local forward proxy (HTTP with CONNECT, on proxy-chain), run detached by the
 * local lifecycle as `node <dataDir>/bin/proxy-process.cjs <instanceDir> [--port N] [--policy FILE]`
 * (this file, bundled by proxy-program.ts).
 *
 * It reads its intent and credentials from the instance directory, listens on 127.0.0.1 (the
 * previous port when `--port` is given and free, else a kernel-chosen one), requires Basic
 * Proxy-Authorization (407 otherwise) and then records itself in `instance.json`, which is what
 * the lifecycle waits for. SIGHUP re-reads the credentials and the egress policy; SIGTERM and
 * SIGINT close and exit. If another proxy process already serves the same directory, the one with
 * the higher pid exits.
 *
 * Egress policy (docs/proxies.md#egress-policy): the document comes from `--policy FILE` (re-read
 * when it changes) or else the `EGRESS_PROXY_POLICY` environment variable; without either, the
 * default deny. Every destination is resolved once, judged, and the connection pinned to the
 * judged addresses; a refused one is answered `403` with the reason, before any connection.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { pino } from 'pino';
import { RequestError, Server, type PrepareRequestFunctionOpts, type PrepareRequestFunctionResult } from 'proxy-chain';
import { checkEgress, EgressDeniedError } from '../../egress/enforce.ts';
import { startLivePolicy, type LivePolicy } from '../../egress/live-policy.ts';
import { createLogger, type Logger } from '../../logging.ts';
import type { ProxyCredentials } from '../lifecycle.ts';
import {
  asCredentials,
  asInstance,
  asIntent,
  CREDENTIALS_FILE,
  INSTANCE_FILE,
  INTENT_FILE,
  readJson,
  writeJsonAtomic,
  type InstanceRecord,
} from './instance-files.ts';
import { createDenialRecorder, type DenialRecorder } from './denial-stats.ts';
import { findProxyProcesses } from './process-table.ts';

const EXIT_DUPLICATE = 0;
const EXIT_BAD_STATE = 78;

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

async function loadCredentials(dir: string): Promise<ProxyCredentials | undefined> {
  return asCredentials(await readJson(join(dir, CREDENTIALS_FILE)));
}

/** How long a destination's name may take to resolve before the request is refused as unresolvable. */
const RESOLVE_TIMEOUT_MS = 10_000;

function resolveAll(hostname: string, signal: AbortSignal): Promise<{ address: string; family: number }[]> {
  // getaddrinfo cannot be cancelled: the signal only stops the wait for it.
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(new Error('resolution timed out'));
    signal.addEventListener('abort', onAbort, { once: true });
    lookup(hostname, { all: true, verbatim: true }).then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** The path and query of a plain-HTTP request's absolute URI (what the echo exception compares). */
function pathOf(url: string | undefined): string {
  try {
    const u = new URL(url ?? '');
    return `${u.pathname}${u.search}`;
  } catch {
    return '';
  }
}

interface Egress {
  policy: LivePolicy;
  denials: DenialRecorder;
  logger: Logger;
}

/** Upstream keep-alive sockets belong to one policy generation: a changed policy never reuses a socket the old one judged. */
function agentFor(egress: Egress): () => Agent {
  let generation = egress.policy.generation;
  let agent = new Agent({ keepAlive: true });
  return () => {
    if (egress.policy.generation !== generation) {
      agent.destroy();
      agent = new Agent({ keepAlive: true });
      generation = egress.policy.generation;
    }
    return agent;
  };
}

/** A hostile client can be refused at line rate: one log line per reason per minute, the metric counts them all. */
function denialLog(logger: Logger): (reason: string, fields: Record<string, unknown>) => void {
  const last = new Map<string, number>();
  return (reason, fields) => {
    const now = performance.now();
    const previous = last.get(reason);
    if (previous !== undefined && now - previous < 60_000) return;
    last.set(reason, now);
    logger.info({ ...fields, reason }, 'egress denied (further denials for this reason in the next minute are counted, not logged)');
  };
}

async function listen(port: number, check: (username: string, password: string) => boolean, egress: Egress): Promise<Server> {
  const httpAgent = agentFor(egress);
  const logDenial = denialLog(egress.logger);
  const prepare = async (opts: PrepareRequestFunctionOpts): Promise<PrepareRequestFunctionResult> => {
    if (!check(opts.username, opts.password)) return { requestAuthentication: true };
    const request = opts.isHttp ? { method: opts.request.method ?? '', path: pathOf(opts.request.url) } : undefined;
    try {
      const dnsLookup = await checkEgress(
        () => egress.policy.current(),
        { hostname: opts.hostname, port: opts.port, ...(request ? { request } : {}) },
        resolveAll,
        AbortSignal.timeout(RESOLVE_TIMEOUT_MS),
      );
      // proxy-chain types it as dns.lookup itself; net and http only call it as a LookupFunction.
      return { ...(dnsLookup ? { dnsLookup: dnsLookup as unknown as NonNullable<PrepareRequestFunctionResult['dnsLookup']> } : {}), ...(opts.isHttp ? { httpAgent: httpAgent() } : {}) };
    } catch (err) {
      if (!(err instanceof EgressDeniedError)) throw err;
      egress.denials.record(err.reason);
      logDenial(err.reason, { target: `${opts.hostname}:${opts.port}`, method: opts.isHttp ? request?.method : 'CONNECT' });
      throw new RequestError(`Forbidden by egress policy: ${err.reason}\n`, 403);
    }
  };
  const server = new Server({
    host: '127.0.0.1',
    port,
    verbose: false,
    authRealm: 'egress',
    prepareRequestFunction: prepare,
  });
  await server.listen();
  return server;
}

async function main(): Promise<void> {
  const dir = process.argv[2] ?? '';
  const portFlag = process.argv.indexOf('--port');
  const portHint = portFlag > 0 ? Number(process.argv[portFlag + 1]) : 0;
  const policyFlag = process.argv.indexOf('--policy');
  const policyFile = policyFlag > 0 ? process.argv[policyFlag + 1] : undefined;
  const logger = createLogger({ level: 'info', destination: pino.destination(1) }).child({ instanceDir: dir });

  // At most one process per instance: defer to the one instance.json names, else to any older (lower) pid.
  const established = asInstance(await readJson(join(dir, INSTANCE_FILE)))?.pid;
  const others = (await findProxyProcesses(dir)).filter((pid) => pid !== process.pid && (pid === established || pid < process.pid));
  if (others.length > 0) {
    logger.info({ others }, 'another proxy process already serves this instance; exiting');
    process.exit(EXIT_DUPLICATE);
  }

  const intent = asIntent(await readJson(join(dir, INTENT_FILE)));
  let credentials = await loadCredentials(dir);
  if (!intent || !credentials) {
    logger.error('intent.json or credentials.json is missing or malformed');
    process.exit(EXIT_BAD_STATE);
  }
  const check = (username: string, password: string): boolean =>
    credentials !== undefined && sameSecret(username, credentials.username) && sameSecret(password, credentials.password);

  // This program is an entry point of its own: the environment is its configuration (container and VM images).
  const envPolicy = process.env.EGRESS_PROXY_POLICY;
  const policy = await startLivePolicy({
    ...(policyFile ? { file: policyFile } : {}),
    ...(envPolicy ? { envText: envPolicy } : {}),
    logger: logger.child({ component: 'egress-policy' }),
  });
  const startedAt = new Date().toISOString();
  const egress: Egress = { policy, denials: createDenialRecorder(dir, { pid: process.pid, startedAt }, logger), logger };

  let server: Server;
  try {
    server = await listen(Number.isInteger(portHint) && portHint > 0 ? portHint : 0, check, egress);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    logger.info({ port: portHint }, 'previous port is taken; listening on a new one');
    server = await listen(0, check, egress);
  }
  // Its own listener too: with loopback allowed, a client could otherwise loop the proxy through itself.
  await policy.guard({ host: '127.0.0.1', port: server.port, role: 'proxy' });
  server.on('requestFailed', ({ error }: { error: Error }) => logger.warn({ err: error.message }, 'proxied request failed'));

  // Handlers first: the lifecycle may signal us as soon as instance.json names our pid.
  process.on('SIGHUP', () => {
    loadCredentials(dir).then(
      (next) => {
        if (next) credentials = next;
        logger.info('credentials reloaded');
      },
      (err: unknown) => logger.error({ err: (err as Error).message }, 'credentials reload failed'),
    );
    void policy.reload();
  });
  const stop = (sig: string): void => {
    logger.info({ signal: sig }, 'stopping');
    policy.close();
    Promise.all([server.close(true), egress.denials.flush()]).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));

  const record: InstanceRecord = { ...intent, pid: process.pid, port: server.port, startedAt };
  await writeJsonAtomic(join(dir, INSTANCE_FILE), record);
  logger.info({ name: intent.name, port: server.port }, 'proxy listening');
}

main().catch((err: unknown) => {
  process.stderr.write(`proxy process failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
