import { Command, CommanderError, Option } from 'commander';
import { ConfigError, EgressError, UsageError } from '../errors.ts';
import { ApiClient } from './api-client.ts';
import { apiUrlOf, localTokenOf, resolveApiAccess } from './api-access.ts';
import type { EventsOptions } from './commands/event-commands.ts';
import { addServerOptions } from './commands/server-commands.ts';
import { errorLine, type CliIO } from './output.ts';
import { GET_TYPES, POOL_TYPES } from './resource-types.ts';
import type { ServerFlags } from './server-config.ts';
import type { ServerCommandOptions } from './commands/run-server.ts';
import { JOB_STATES } from '../jobs/job-inspection.ts';
import { packageVersion } from '../version.ts';

export interface CliEnv {
  REDIS_URL?: string;
  REDIS_CLUSTER_NODES?: string;
  REDIS_PASSWORD_FILE?: string;
  REDIS_CA_FILE?: string;
  EGRESS_LOG_LEVEL?: string;
  EGRESS_API_URL?: string;
  EGRESS_API_TOKEN?: string;
  EGRESS_API_TOKEN_FILE?: string;
  /** The data directory of the `egress up` the client commands talk to (default `.egress`). */
  EGRESS_DATA_DIR?: string;
  /** OpenTelemetry's standard variables: tracing is on when an OTLP endpoint is set (src/telemetry/config.ts). */
  [otel: `OTEL_${string}`]: string | undefined;
}

const DEFAULT_IO: CliIO = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

export interface MainOptions {
  /** Ends `egress events --watch` (tests; the command line ends it with SIGINT or SIGTERM). */
  watchSignal?: AbortSignal;
  /** What test harnesses give the long-running commands (injected providers, a hook on the running roles). */
  server?: ServerCommandOptions;
}

interface ClientFlags {
  apiUrl?: string;
  tokenFile?: string;
  dataDir: string;
}

function addClientOptions(cmd: Command, env: CliEnv): Command {
  return cmd
    .option(
      '--api-url <url>',
      'the egress API (env EGRESS_API_URL; default: the running `egress up` of --data-dir, else http://127.0.0.1:8080)',
      env.EGRESS_API_URL,
    )
    .option(
      '--token-file <file>',
      'file holding an API token (env EGRESS_API_TOKEN_FILE; or EGRESS_API_TOKEN; default: that of --data-dir)',
      env.EGRESS_API_TOKEN_FILE,
    )
    .option('--data-dir <dir>', 'the data directory of the `egress up` to talk to (env EGRESS_DATA_DIR)', env.EGRESS_DATA_DIR ?? '.egress');
}

async function clientOf(flags: ClientFlags, env: CliEnv): Promise<ApiClient> {
  return new ApiClient(await resolveApiAccess({ apiUrl: flags.apiUrl, tokenFile: flags.tokenFile, token: env.EGRESS_API_TOKEN, dataDir: flags.dataDir }));
}

/*
 * Each command's module is loaded when that command runs, never to build the tree: `egress --help`
 * and `--version` cost commander and this file, and a client command loads neither zod nor YAML nor a
 * provider's client library unless it needs them (test/cli/start-up-imports.test.ts holds this).
 */
const clientCommands = () => import('./commands/client-commands.ts');
const proxyCommands = () => import('./commands/proxy-commands.ts');
const applyCommand = () => import('./commands/apply-command.ts');
const poolCommands = () => import('./commands/pool-commands.ts');
const eventCommands = () => import('./commands/event-commands.ts');
const usageCommands = () => import('./commands/usage-commands.ts');

/** A watch runs until it is interrupted (Ctrl-C): SIGINT and SIGTERM end it cleanly, exit 0. */
function watchSignal(): AbortSignal {
  const controller = new AbortController();
  const stop = (): void => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return controller.signal;
}

/** Builds the `egress` command tree; actions store their exit code in `result`. */
function buildProgram(env: CliEnv, io: CliIO, result: { code: number }, options: MainOptions): Command {
  const program = new Command('egress')
    .description('Orchestrator for fleets of egress proxies used by web crawlers')
    .version(packageVersion(), '-V, --version', 'print the version')
    .exitOverride()
    .enablePositionalOptions()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError('(run with --help for usage)');
  const signal = AbortSignal.timeout(10 * 60_000);

  for (const [name, what] of [
    ['up', 'run every role in one process (starts its own redis-server without REDIS_URL or REDIS_CLUSTER_NODES)'],
    ['scheduler', 'run the scheduler (one leads, others stand by)'],
    ['worker', 'run a worker for the chosen queues'],
    ['publisher', 'run the publisher of results into status and metrics'],
    ['api', 'run the HTTP API, Bull Board and /metrics'],
  ] as const) {
    addServerOptions(program.command(name).description(what), env, name).action(async (flags: ServerFlags, cmd: Command) => {
      // Loaded on demand: the client commands never pay for BullMQ, Bull Board and the providers.
      const { runServerCommand } = await import('./commands/run-server.ts');
      // A level the user asked for is shown as asked, in either format; else a terminal gets the quiet one.
      const logLevelGiven = cmd.getOptionValueSource('logLevel') === 'cli' || env.EGRESS_LOG_LEVEL !== undefined;
      result.code = await runServerCommand(name, { ...flags, otelEnv: env, logLevelGiven }, io, options.server);
    });
  }

  program
    .command('token')
    .description('print the API token of a data directory (`curl -H "Authorization: Bearer $(npx egress token)"`)')
    .option('--data-dir <dir>', 'the data directory of `egress up` (env EGRESS_DATA_DIR)', env.EGRESS_DATA_DIR ?? '.egress')
    .action(async (flags: { dataDir: string }) => {
      io.out(`${await localTokenOf(flags.dataDir)}\n`);
    });

  program
    .command('down')
    .description('stop everything of a data directory: its `egress up`, the local proxy host and proxies, the private redis-server')
    .option('--data-dir <dir>', 'the data directory (env EGRESS_DATA_DIR)', env.EGRESS_DATA_DIR ?? '.egress')
    .action(async (flags: { dataDir: string }) => {
      const { down } = await import('./commands/down-command.ts');
      result.code = await down(flags.dataDir, io);
    });
  program
    .command('url')
    .description('print the URL of the API the CLI talks to: --api-url (EGRESS_API_URL), else the running `egress up` of --data-dir')
    .option('--api-url <url>', 'the egress API (env EGRESS_API_URL)', env.EGRESS_API_URL)
    .option('--data-dir <dir>', 'the data directory of the `egress up` (env EGRESS_DATA_DIR)', env.EGRESS_DATA_DIR ?? '.egress')
    .action(async (flags: { apiUrl?: string; dataDir: string }) => {
      io.out(`${await apiUrlOf(flags.apiUrl, flags.dataDir)}\n`);
    });

  addClientOptions(program.command('check').description('enqueue an ad-hoc health check of a provider'), env)
    .argument('<provider>', 'provider name')
    .option('--wait', 'wait for the result and print it (exit 1 when a target is not ready)')
    .addOption(new Option('-o, --output <format>', 'json or yaml'))
    .action(async (provider: string, flags: ClientFlags & { wait?: boolean; output?: string }) => {
      result.code = await (await clientCommands()).checkProvider(await clientOf(flags, env), io, provider, flags.wait ?? false, flags.output, signal);
    });

  const get = program.command('get').description(`show resources: ${GET_TYPES}`);
  // `egress get pods`: an unknown type is a usage error that lists the known ones (without
  // arguments, commander prints the usage to stderr and main() exits 2).
  get.on('command:*', (operands: string[]) => {
    throw new UsageError(`get: unknown resource type "${operands[0] ?? ''}" (known: ${GET_TYPES})`);
  });
  addClientOptions(get.command('providerhealth').alias('ph').description('show ProviderHealth objects'), env)
    .argument('[name]', 'one provider')
    .addOption(new Option('-o, --output <format>', 'json, yaml or wide'))
    .action(async (name: string | undefined, flags: ClientFlags & { output?: string }) => {
      result.code = await (await clientCommands()).getProviderHealth(await clientOf(flags, env), io, name, flags.output, signal);
    });

  addClientOptions(get.command('proxies').alias('proxy').description('show proxies'), env)
    .argument('[name]', 'one proxy')
    .addOption(new Option('-o, --output <format>', 'json, yaml or wide'))
    .action(async (name: string | undefined, flags: ClientFlags & { output?: string }) => {
      result.code = await (await proxyCommands()).getProxies(await clientOf(flags, env), io, name, flags.output, signal);
    });
  addClientOptions(get.command('pools').alias('pool').description('show ProxyPools (one pool: with its members in -o json|yaml)'), env)
    .argument('[name]', 'one pool')
    .addOption(new Option('-o, --output <format>', 'json or yaml'))
    .action(async (name: string | undefined, flags: ClientFlags & { output?: string }) => {
      result.code = await (await poolCommands()).getPools(await clientOf(flags, env), io, name, flags.output, signal);
    });
  addClientOptions(program.command('apply').description('create or update proxies and pools from a YAML file (one or many documents, dispatched by kind)'), env)
    .option('-f, --filename <file>', 'the file, or - for standard input')
    .action(async (flags: ClientFlags & { filename?: string }) => {
      const stdin = async (): Promise<string> => {
        let text = '';
        for await (const chunk of process.stdin) text += String(chunk);
        return text;
      };
      result.code = await (await applyCommand()).applyProxies(await clientOf(flags, env), io, flags.filename, stdin, signal);
    });
  addClientOptions(program.command('delete').description('delete a proxy (its instance is removed first) or a pool (its members first)'), env)
    .argument('<type>', 'proxy or pool')
    .argument('<name>', 'the proxy or pool')
    .option('--orphan', 'forget the proxy without removing its instance (left to GC, if its provider is configured)')
    .action(async (kind: string, name: string, flags: ClientFlags & { orphan?: boolean }) => {
      if (POOL_TYPES.includes(kind)) {
        if (flags.orphan) throw new UsageError('--orphan: applies to a proxy, not a pool');
        result.code = await (await poolCommands()).deletePool(await clientOf(flags, env), io, name, signal);
        return;
      }
      result.code = await (await proxyCommands()).deleteProxy(await clientOf(flags, env), io, kind, name, { orphan: flags.orphan === true }, signal);
    });
  addClientOptions(program.command('rotate').description("replace every member of a pool, surge-first (as when they reach the pool's maxAge)"), env)
    .argument('<type>', 'pool')
    .argument('<name>', 'the pool')
    .action(async (kind: string, name: string, flags: ClientFlags) => {
      result.code = await (await poolCommands()).rotatePool(await clientOf(flags, env), io, kind, name, signal);
    });

  addClientOptions(program.command('events').description('show what happened and why, oldest first (like kubectl get events)'), env)
    .option('--proxy <name>', 'events of one proxy')
    .option('--provider <name>', 'events concerning one provider')
    .option('--type <type>', 'Normal or Warning')
    .option('--reason <reason>', 'one reason (Applied, InstanceCreated, NotReady, CheckReasonChanged, …)')
    .option('--since <when>', 'events after an event id, from an RFC 3339 time, or from a duration ago (10m)')
    .option('--limit <n>', 'at most this many (1 to 1000; the newest, or with --since the oldest after it)')
    .option('-w, --watch', 'after listing, print each new event as it is recorded')
    .addOption(new Option('-o, --output <format>', 'json or yaml (with --watch: json, one event a line)'))
    .action(async (flags: ClientFlags & EventsOptions) => {
      result.code = await (
        await eventCommands()
      ).listEvents(await clientOf(flags, env), io, flags, flags.watch ? (options.watchSignal ?? watchSignal()) : signal);
    });
  addClientOptions(
    program.command('usage').description('show traffic, instance hours and cost per day, by pool, provider, domain, location or machine type'),
    env,
  )
    .option('--from <when>', 'start: an RFC 3339 time or a date (default: 7 days before --to)')
    .option('--to <when>', 'end: an RFC 3339 time, or a date (its whole day included; default: now)')
    .option('--group-by <key>', 'pool, provider, domain, location or machineType', 'pool')
    .addOption(new Option('-o, --output <format>', 'table, json or yaml'))
    .action(async (flags: ClientFlags & { from?: string; to?: string; groupBy?: string; output?: string }) => {
      result.code = await (await usageCommands()).showUsage(await clientOf(flags, env), io, flags, signal);
    });
  addClientOptions(program.command('describe').description('show a proxy or a ProviderHealth with its conditions and newest events'), env)
    .argument('<type>', 'proxy or providerhealth (ph)')
    .argument('<name>', 'its name')
    .action(async (kind: string, name: string, flags: ClientFlags) => {
      result.code = await (await eventCommands()).describe(await clientOf(flags, env), io, kind, name, signal);
    });

  const jobs = addClientOptions(program.command('jobs').description('list jobs (failed, active, waiting, delayed by default)').enablePositionalOptions(), env)
    .option('--state <states>', `comma-separated states: ${JOB_STATES.join(', ')}`)
    .option('--queue <name>', 'one queue')
    .addOption(new Option('-o, --output <format>', 'json or yaml'))
    .action(async (flags: ClientFlags & { state?: string; queue?: string; output?: string }) => {
      result.code = await (await clientCommands()).listJobs(await clientOf(flags, env), io, flags, signal);
    });
  addClientOptions(jobs.command('retry').description('retry a failed job, or every failed job'), env)
    .argument('[id]', 'job id')
    .option('--all-failed', 'retry every failed job')
    .option('--queue <name>', 'the queue of the job, when its id is in several')
    .action(async (id: string | undefined, flags: ClientFlags & { allFailed?: boolean; queue?: string }) => {
      result.code = await (await clientCommands()).retryJobs(await clientOf(flags, env), io, id, flags, signal);
    });
  return program;
}

/**
 * Runs `egress` with the given arguments and returns the exit code: 0 on success, 1 on a
 * runtime failure, 2 on bad usage or bad configuration, always with a one-line message.
 */
export async function main(argv: readonly string[], env: CliEnv, io: CliIO = DEFAULT_IO, options: MainOptions = {}): Promise<number> {
  const result = { code: 0 };
  const program = buildProgram(env, io, result, options);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return result.code;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help, help and --version exit 0; everything else commander reports (an unknown option
      // or command, a missing argument, `egress` or `egress get` without a command, whose usage it
      // printed to stderr) is bad usage.
      return err.exitCode === 0 ? 0 : 2;
    }
    if (err instanceof ConfigError || err instanceof UsageError) {
      io.err(errorLine(err, false));
      return 2;
    }
    io.err(errorLine(err, err instanceof EgressError));
    return 1;
  }
}
