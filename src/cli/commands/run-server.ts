import { freezeConfig, type AppConfig } from '../../config/app.ts';
import { ConfigError } from '../../errors.ts';
import { resolve } from 'node:path';
import { createLogger, type Logger } from '../../logging.ts';
import { resolveLogFormat, type LogFormatFlag } from '../../pretty-log.ts';
import { localDataDir } from '../../providers/local/config.ts';
import { servingProxies } from '../../providers/local/leftover-processes.ts';
import { SERVER_FLAG_DEFAULTS } from '../server-flag-defaults.ts';
import { SecretRegistry } from '../../secrets/secret-registry.ts';
import { ensurePrivateDir } from '../../redis/private-files.ts';
import { ensureLocalToken, LOCAL_TOKEN_NAME, recordRunningApi, type LocalToken } from '../local-api-access.ts';
import { errorLine, type CliIO } from '../output.ts';
import { raiseOpenFilesLimit } from '../../open-files.ts';
import { runRoles, type RunningRoles, type RunRolesOptions } from '../run-roles.ts';
import { buildServerConfig, type ServerFlags } from '../server-config.ts';
import { ROLES_OF } from './server-commands.ts';
import { prepareTrustedDirs } from '../trusted-dirs.ts';

function waitForSignal(logger: Logger): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      // A second signal while shutting down means "now".
      const force = (): void => {
        logger.warn('second signal: exiting at once');
        process.exit(1);
      };
      process.once('SIGINT', force);
      process.once('SIGTERM', force);
      resolve(signal);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

/**
 * An API without `--api-token-file` or `--no-auth` requires the data directory's own token: made
 * (or read) here, before anything listens, and given to the API as its one token, named `local`.
 */
async function withLocalToken(config: AppConfig): Promise<{ config: AppConfig; local?: LocalToken }> {
  if (config.api.localTokenFile === undefined) return { config };
  try {
    await ensurePrivateDir(config.dataDir);
  } catch (err) {
    // A data directory that cannot be made private is a configuration problem (exit 2), named as such.
    throw new ConfigError('--data-dir', (err as Error).message, { cause: err });
  }
  const local = await ensureLocalToken(config.dataDir, config.api.allowOpenTokenFile === true);
  const api = { ...config.api, tokens: [local.token], tokenNames: [LOCAL_TOKEN_NAME], hostCheck: true };
  return { config: freezeConfig({ ...config, api }), local };
}

const NO_RECORD = (): Promise<void> => Promise.resolve();

/**
 * Records where the API listens in the data directory, for the CLI of the same user (`up` always;
 * `api` when it has no `--api-token-file`, i.e. on loopback). Returns the record's remover.
 */
async function recordApi(role: string, config: AppConfig, url: string, local: LocalToken | undefined, logger: Logger): Promise<() => Promise<void>> {
  if (role !== 'up' && local === undefined && !config.api.noAuth) return NO_RECORD;
  try {
    await ensurePrivateDir(config.dataDir);
    return await recordRunningApi(config.dataDir, { url, pid: process.pid, ...(local ? { tokenFile: local.file } : {}) });
  } catch (err) {
    if (local) throw err;
    logger.warn({ err: (err as Error).message, dataDir: config.dataDir }, 'cannot record where the API listens: the CLI needs --api-url');
    return NO_RECORD;
  }
}

/** `npx egress down`, with the data directory when it is not the default one of this working directory. */
function downCommand(dataDir: string): string {
  return dataDir === resolve(SERVER_FLAG_DEFAULTS.dataDir) ? 'npx egress down' : `npx egress down --data-dir ${dataDir}`;
}

/** The banner's last lines: where the data directory is, how the CLI and curl find this API, and how to stop everything. */
function upGuide(dataDir: string, url: string): string {
  const found =
    dataDir === resolve(SERVER_FLAG_DEFAULTS.dataDir)
      ? `\`npx egress …\` run in ${process.cwd()} finds this API by itself; elsewhere: export EGRESS_DATA_DIR=${dataDir}`
      : `\`npx egress …\` finds this API with export EGRESS_DATA_DIR=${dataDir} (or --data-dir)`;
  return `data directory: ${dataDir} (${found}); for curl: export EGRESS_API_URL=${url}\nstop: Ctrl-C, then \`${downCommand(dataDir)}\` also stops the local proxies\n`;
}

/**
 * After a clean stop: the local proxies keep serving by design (a restart adopts them), so say how
 * many do and the one command that stops them too.
 */
async function sayWhatKeepsServing(config: AppConfig, io: CliIO, logger: Logger, quiet: boolean): Promise<void> {
  const dirs = config.providers.flatMap((p) => (p.type === 'local' ? [localDataDir(p, config.dataDir)] : []));
  if (dirs.length === 0) return;
  const serving = await servingProxies(config.dataDir, dirs).catch((err: unknown) => {
    logger.debug({ err: (err as Error).message }, 'cannot count the local proxies that keep serving');
    return 0;
  });
  if (serving === 0) {
    if (quiet) io.err('egress stopped\n');
    return;
  }
  io.err(
    `egress stopped; ${serving} local ${serving === 1 ? 'proxy keeps' : 'proxies keep'} serving (the next start adopts them): \`${downCommand(config.dataDir)}\` stops everything\n`,
  );
}

export interface ServerCommandOptions extends RunRolesOptions {
  /** Test harnesses (test/support) reach the roles of the running command, e.g. to break one of them. */
  onStarted?: (running: RunningRoles) => void;
}

/**
 * Runs a long-running command until SIGINT/SIGTERM, then shuts down within bounds and returns 0;
 * throws (exit 1, its message printed) when a role failed — after closing everything — or when
 * a step of the shutdown failed (a ShutdownError listing them).
 */
export async function runServerCommand(role: string, flags: ServerFlags, io: CliIO, options: ServerCommandOptions = {}): Promise<number> {
  const roles = ROLES_OF[role] ?? [];
  const built = await buildServerConfig(flags, { defaultProviders: role === 'up', servesApi: roles.includes('api') });
  // Before anything starts: the directories this process will execute from or trust (exit 2 when one may not be trusted).
  const trusted = await prepareTrustedDirs(built, roles, !flags.checkConfig);
  if (flags.checkConfig) {
    const config = trusted;
    io.out(
      `configuration OK: ${role}, providers ${config.providers.map((p) => `${p.name} (${p.type})`).join(', ') || 'none'}${config.store?.kind === 'kubernetes' ? `, store kubernetes (namespace ${config.store.namespace})` : ''}\n`,
    );
    return 0;
  }
  const { config, local } = await withLocalToken(trusted);
  // The one secret registry of the process: its logger's lines and every role's records pass its redaction.
  const secrets = new SecretRegistry();
  const format = resolveLogFormat((flags.logFormat ?? 'auto') as LogFormatFlag, process.stderr.isTTY === true);
  // At a terminal without --log-level: warnings and errors only, and the few lines below (up, stopping, stopped).
  const quiet = format === 'pretty' && flags.logLevelGiven !== true;
  const colour = format === 'pretty' && process.stderr.isTTY === true && process.stderr.hasColors();
  const logger = createLogger({ level: quiet && config.logLevel !== 'silent' ? 'warn' : config.logLevel, secrets, format, colour });
  for (const warning of [config.api.tokenFileWarning, local?.warning]) if (warning) logger.warn(warning);
  if (config.api.noAuth && roles.includes('api'))
    logger.warn('--no-auth: the API requires no token: every user of this machine can read every proxy password and apply or delete proxies');
  const openFiles = await raiseOpenFilesLimit(logger);
  const running = await runRoles(config, roles, logger, { ...options, secrets, ...(openFiles === undefined ? {} : { openFiles }) });
  options.onStarted?.(running);
  // Listen before anything else is awaited, and before saying "up": the roles already work (a check
  // may be in flight), whoever reads that line may send SIGTERM at once, and a signal before the
  // handler exists kills the process without a shutdown (its children orphaned).
  const signalled = waitForSignal(logger);
  const removeRecord = running.api ? await recordApi(role, config, running.api.url, local, logger) : NO_RECORD;
  if (role === 'up' && running.api) {
    // One write: whoever waits for the first line reads the token's line with it.
    const tokenLine = local
      ? `API token: ${local.file} (the CLI run with this data directory uses it; curl -H @${local.headerFile} ${running.api.url}/v1/proxies)\n`
      : '';
    io.err(
      `egress is up: API ${running.api.url}, Bull Board ${running.api.url}/admin/queues, metrics ${running.api.url}/metrics\n${tokenLine}${upGuide(config.dataDir, running.api.url)}`,
    );
  }
  // Until a signal, or a role that fails (a consumer that stopped taking jobs, a lost private
  // Redis): either way everything is closed; a failure then ends the command with its cause.
  const ended = await Promise.race([
    signalled.then((signal) => ({ signal })),
    running.run().then(
      () => ({ failure: new Error('the roles stopped on their own') }),
      (err: unknown) => ({ failure: err instanceof Error ? err : new Error(String(err)) }),
    ),
  ]);
  if ('signal' in ended) {
    logger.info({ signal: ended.signal }, 'shutting down');
    if (quiet) io.err(`egress: shutting down (${ended.signal}) …\n`);
  } else logger.error({ err: ended.failure.message }, 'a role failed: shutting down');
  const hardStop = setTimeout(
    () => {
      logger.error('shutdown did not finish in time: exiting');
      // The failure that started the shutdown is still the command's last line.
      if ('failure' in ended) io.err(errorLine(ended.failure));
      process.exit(1);
    },
    config.shutdownGraceMs * 2 + 15_000,
  );
  hardStop.unref();
  const shutdown = await running.close().then(
    () => undefined,
    (err: unknown) => err as Error,
  );
  await removeRecord().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'cannot remove the API record'));
  clearTimeout(hardStop);
  if ('failure' in ended) throw ended.failure;
  // Each failed step was logged by the shutdown; the exit code says it did not end cleanly.
  if (shutdown) throw shutdown;
  logger.info('stopped');
  if (role === 'up') await sayWhatKeepsServing(config, io, logger, quiet);
  return 0;
}
