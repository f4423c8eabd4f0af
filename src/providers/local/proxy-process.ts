/**
 * Entry point of one forward proxy process (HTTP with CONNECT, src/forward-proxy): the container and
 * VM proxy, and — in its instance-directory mode — a local proxy of the earlier one-process-per-proxy
 * model (local proxies are now served by the proxy host, proxy-host.ts; the lifecycle adopts these
 * until they exit). That mode was run detached by the local lifecycle as `node <dataDir>/bin/proxy-process.cjs <instanceDir> [--port N] [--policy FILE]`
 * (this file, bundled by proxy-program.ts). In that mode it counts its traffic by destination domain in
 * the instance directory's `traffic-stats.json` (traffic-stats.ts; `--traffic-domains N`, default 100, 0: none).
 *
 * It reads its intent and credentials from the instance directory, listens on 127.0.0.1 (the
 * previous port when `--port` is given and free, else a kernel-chosen one), requires Basic
 * Proxy-Authorization (407 otherwise) and then records itself in `instance.json`, which is what
 * the lifecycle waits for. SIGHUP re-reads the credentials and the egress policy; SIGTERM and
 * SIGINT close and exit. If another proxy process already serves the same directory, the one with
 * the higher pid exits.
 *
 * Container mode (`node proxy-process.cjs --env`, or no instance directory at all; Dockerfile.proxy runs it):
 * no instance directory and no files. It listens on PROXY_HOST (default 0.0.0.0) port PROXY_PORT
 * (default 3128), takes its one credential from PROXY_USER and PROXY_PASSWORD (both required) and
 * its policy from `--policy FILE` or EGRESS_PROXY_POLICY, logs to stdout, and exits 0 on SIGTERM.
 * A missing or bad variable exits 2 with a message naming it. It counts its traffic in memory
 * (`--traffic-domains N` as above) and answers the counts to its own
 * `GET http://egress-proxy.invalid/traffic` (traffic-report.ts), which is how the worker reads them.
 *
 * Egress policy (docs/proxies.md#egress-policy): the document comes from `--policy FILE` (re-read
 * when it changes) or else the `EGRESS_PROXY_POLICY` environment variable; without either, the
 * default deny. Every destination is resolved once, judged, and the connection pinned to the
 * judged addresses; a refused one is answered `403` with the reason, before any connection.
 */
import { join } from 'node:path';
import { pino } from 'pino';
import type { ForwardProxy } from '../../forward-proxy/server.ts';
import { startLivePolicy, type LivePolicy } from '../../egress/live-policy.ts';
import { createLogger, type Logger } from '../../logging.ts';
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
import { createMemoryTrafficRecorder, createTrafficRecorder, DEFAULT_TRAFFIC_DOMAINS, MAX_TRAFFIC_DOMAINS, type TrafficRecorder } from './traffic-stats.ts';
import { findProxyProcesses } from './process-table.ts';
import { credentialCheck, listenProxy, type Egress } from './proxy-server.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

async function loadCredentials(dir: string): Promise<ProxyCredentials | undefined> {
  return asCredentials(await readJson(join(dir, CREDENTIALS_FILE)));
}

function listen(
  host: string,
  port: number,
  check: (username: string, password: string) => boolean,
  egress: Egress,
  traffic?: TrafficRecorder,
): Promise<ForwardProxy> {
  // The counts are also answered to the proxy's own `GET http://egress-proxy.invalid/traffic` (traffic-report.ts).
  return listenProxy({ host, port, check, egress, ...(traffic ? { traffic, trafficReport: () => traffic.stats() } : {}) });
}

/** `--traffic-domains N` (0-MAX_TRAFFIC_DOMAINS; 0: no accounting), or the default; undefined when malformed. */
function trafficDomainsOption(): number | undefined {
  const text = optionAfter('--traffic-domains');
  if (text === undefined) return DEFAULT_TRAFFIC_DOMAINS;
  const n = Number(text);
  return Number.isInteger(n) && n >= 0 && n <= MAX_TRAFFIC_DOMAINS ? n : undefined;
}

const EXIT_DUPLICATE = 0;
const EXIT_BAD_STATE = 78;
const EXIT_BAD_ENV = 2;
const DEFAULT_CONTAINER_PORT = 3128;

function optionAfter(flag: string): string | undefined {
  const at = process.argv.indexOf(flag);
  return at > 0 ? process.argv[at + 1] : undefined;
}

async function startPolicy(logger: Logger): Promise<LivePolicy> {
  // This program is an entry point of its own: the environment is its configuration (container and VM images).
  const policyFile = optionAfter('--policy');
  const envPolicy = process.env.EGRESS_PROXY_POLICY;
  return startLivePolicy({
    ...(policyFile ? { file: policyFile } : {}),
    ...(envPolicy ? { envText: envPolicy } : {}),
    logger: logger.child({ component: 'egress-policy' }),
  });
}

function stopOnSignals(server: ForwardProxy, policy: LivePolicy, counts: { flush(): Promise<void> }[], logger: Logger): void {
  const stop = (sig: string): void => {
    logger.info({ signal: sig }, 'stopping');
    policy.close();
    Promise.all([server.close(), ...counts.map((c) => c.flush())]).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

/** Container mode: everything from the environment, nothing on disk. */
async function mainFromEnv(): Promise<void> {
  const logger = createLogger({ level: 'info', destination: pino.destination(1) }).child({ mode: 'env' });
  const fail = (message: string): never => {
    process.stderr.write(`proxy process: ${message}\n`);
    process.exit(EXIT_BAD_ENV);
  };
  const host = process.env.PROXY_HOST || '0.0.0.0';
  const portText = process.env.PROXY_PORT || String(DEFAULT_CONTAINER_PORT);
  const port = Number(portText);
  if (!/^[0-9]+$/.test(portText) || port < 1 || port > 65535) fail(`PROXY_PORT: expected a port number 1-65535, got "${portText}"`);
  const username = process.env.PROXY_USER ?? '';
  const password = process.env.PROXY_PASSWORD ?? '';
  if (!username) fail('PROXY_USER: required (the user name clients send in Proxy-Authorization)');
  if (!password) fail('PROXY_PASSWORD: required (the password clients send in Proxy-Authorization)');
  const check = credentialCheck(() => ({ username, password }));
  const trafficDomains = trafficDomainsOption();
  if (trafficDomains === undefined) fail(`--traffic-domains: expected a whole number 0-${MAX_TRAFFIC_DOMAINS}`);

  const policy = await startPolicy(logger);
  // Counts are logged (denialLog); there is no instance directory to keep them in.
  const denials: DenialRecorder = { record: () => undefined, flush: () => Promise.resolve() };
  // Traffic is counted in memory and read by the worker through the proxy itself (traffic-report.ts).
  const identity = { pid: process.pid, startedAt: new Date().toISOString() };
  const traffic = trafficDomains ? createMemoryTrafficRecorder(identity, trafficDomains) : undefined;
  const server = await listen(host, port, check, { policy, denials, logger }, traffic);
  await policy.guard({ host, port: server.port, role: 'proxy' });
  process.on('SIGHUP', () => void policy.reload());
  stopOnSignals(server, policy, [denials], logger);
  logger.info({ host, port: server.port, policyLoaded: policy.loaded }, 'proxy listening');
}

async function main(): Promise<void> {
  const dir = process.argv[2];
  if (dir === undefined || dir.startsWith('--')) return mainFromEnv();
  const portFlag = process.argv.indexOf('--port');
  const portHint = portFlag > 0 ? Number(process.argv[portFlag + 1]) : 0;
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
  const check = credentialCheck(() => credentials);
  const trafficDomains = trafficDomainsOption();
  if (trafficDomains === undefined) {
    logger.error(`--traffic-domains: expected a whole number 0-${MAX_TRAFFIC_DOMAINS}`);
    process.exit(EXIT_BAD_STATE);
  }

  const policy = await startPolicy(logger);
  const startedAt = new Date().toISOString();
  const egress: Egress = { policy, denials: createDenialRecorder(dir, { pid: process.pid, startedAt }, logger), logger };
  const traffic = trafficDomains > 0 ? createTrafficRecorder(dir, { pid: process.pid, startedAt }, logger, trafficDomains) : undefined;

  let server: ForwardProxy;
  try {
    server = await listen('127.0.0.1', Number.isInteger(portHint) && portHint > 0 ? portHint : 0, check, egress, traffic);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    logger.info({ port: portHint }, 'previous port is taken; listening on a new one');
    server = await listen('127.0.0.1', 0, check, egress, traffic);
  }
  // Its own listener too: with loopback allowed, a client could otherwise loop the proxy through itself.
  await policy.guard({ host: '127.0.0.1', port: server.port, role: 'proxy' });

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
  stopOnSignals(server, policy, traffic ? [egress.denials, traffic] : [egress.denials], logger);

  const record: InstanceRecord = { ...intent, pid: process.pid, port: server.port, startedAt };
  await writeJsonAtomic(join(dir, INSTANCE_FILE), record);
  logger.info({ name: intent.name, port: server.port }, 'proxy listening');
}

main().catch((err: unknown) => {
  process.stderr.write(`proxy process failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
