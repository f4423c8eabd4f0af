import { createLogger, type Logger } from '../../logging.ts';
import type { CliIO } from '../output.ts';
import { raiseOpenFilesLimit } from '../../open-files.ts';
import { runRoles, type RunRolesOptions } from '../run-roles.ts';
import { buildServerConfig, SERVER_FLAG_DEFAULTS, type ServerFlags } from '../server-config.ts';
import { ROLES_OF } from './server-commands.ts';

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

/** Runs a long-running command until SIGINT/SIGTERM, then shuts down within bounds and exits 0. */
export async function runServerCommand(role: string, flags: ServerFlags, io: CliIO, options: RunRolesOptions = {}): Promise<number> {
  const roles = ROLES_OF[role] ?? [];
  const config = await buildServerConfig({ ...SERVER_FLAG_DEFAULTS, ...flags }, { defaultProviders: role === 'up', servesApi: roles.includes('api') });
  if (flags.checkConfig) {
    io.out(
      `configuration OK: ${role}, providers ${config.providers.map((p) => `${p.name} (${p.type})`).join(', ') || 'none'}${config.store?.kind === 'kubernetes' ? `, store kubernetes (namespace ${config.store.namespace})` : ''}\n`,
    );
    return 0;
  }
  const logger = createLogger({ level: config.logLevel });
  const openFiles = await raiseOpenFilesLimit(logger);
  const running = await runRoles(config, roles, logger, { ...options, ...(openFiles === undefined ? {} : { openFiles }) });
  // Listen before saying "up": whoever reads that line may send SIGTERM at once, and a signal
  // before the handler exists kills the process without a shutdown (its children orphaned).
  const signalled = waitForSignal(logger);
  if (role === 'up' && running.api) {
    io.err(`egress is up: API ${running.api.url}, Bull Board ${running.api.url}/admin/queues, metrics ${running.api.url}/metrics\n`);
  }
  const signal = await signalled;
  logger.info({ signal }, 'shutting down');
  const hardStop = setTimeout(
    () => {
      logger.error('shutdown did not finish in time: exiting');
      process.exit(1);
    },
    config.shutdownGraceMs * 2 + 15_000,
  );
  hardStop.unref();
  await running.close();
  clearTimeout(hardStop);
  logger.info('stopped');
  return 0;
}
