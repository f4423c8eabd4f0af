/**
 * Entry point of one local forward proxy (HTTP with CONNECT, on proxy-chain), run detached by the
 * local lifecycle as `node <dataDir>/bin/proxy-process.cjs <instanceDir> [--port N]` (this file,
 * bundled by proxy-program.ts).
 *
 * It reads its intent and credentials from the instance directory, listens on 127.0.0.1 (the
 * previous port when `--port` is given and free, else a kernel-chosen one), requires Basic
 * Proxy-Authorization (407 otherwise) and then records itself in `instance.json`, which is what
 * the lifecycle waits for. SIGHUP re-reads the credentials; SIGTERM and SIGINT close and exit.
 * If another proxy process already serves the same directory, the one with the higher pid exits.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import { pino } from 'pino';
import { Server } from 'proxy-chain';
import { createLogger } from '../../logging.ts';
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

async function listen(port: number, check: (username: string, password: string) => boolean): Promise<Server> {
  const server = new Server({
    host: '127.0.0.1',
    port,
    verbose: false,
    authRealm: 'egress',
    prepareRequestFunction: ({ username, password }) => ({ requestAuthentication: !check(username, password) }),
  });
  await server.listen();
  return server;
}

async function main(): Promise<void> {
  const dir = process.argv[2] ?? '';
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
  const check = (username: string, password: string): boolean =>
    credentials !== undefined && sameSecret(username, credentials.username) && sameSecret(password, credentials.password);

  let server: Server;
  try {
    server = await listen(Number.isInteger(portHint) && portHint > 0 ? portHint : 0, check);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    logger.info({ port: portHint }, 'previous port is taken; listening on a new one');
    server = await listen(0, check);
  }
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
  });
  const stop = (sig: string): void => {
    logger.info({ signal: sig }, 'stopping');
    server.close(true).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));

  const record: InstanceRecord = { ...intent, pid: process.pid, port: server.port, startedAt: new Date().toISOString() };
  await writeJsonAtomic(join(dir, INSTANCE_FILE), record);
  logger.info({ name: intent.name, port: server.port }, 'proxy listening');
}

main().catch((err: unknown) => {
  process.stderr.write(`proxy process failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
