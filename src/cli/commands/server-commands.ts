import type { Command } from 'commander';
import type { RoleName } from '../start-roles.ts';
import { SERVER_FLAG_DEFAULTS } from '../server-flag-defaults.ts';

export interface ServerEnv {
  REDIS_URL?: string;
  REDIS_CLUSTER_NODES?: string;
  REDIS_PASSWORD_FILE?: string;
  REDIS_CA_FILE?: string;
  EGRESS_LOG_LEVEL?: string;
}

export const ROLES_OF: Record<string, readonly RoleName[]> = {
  up: ['publisher', 'worker', 'scheduler', 'api'],
  scheduler: ['scheduler'],
  worker: ['worker'],
  publisher: ['publisher'],
  api: ['api'],
};

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** Adds the options a long-running command takes; the role decides which matter. */
export function addServerOptions(cmd: Command, env: ServerEnv, role: string): Command {
  const d = SERVER_FLAG_DEFAULTS;
  cmd
    .option('--config <file>', 'YAML configuration file of providers')
    .option('--store <kind>', 'where ProviderHealth and Proxy objects live: redis, or kubernetes (custom resources)', d.store)
    .option('--store-kubeconfig <file>', '--store kubernetes: a kubeconfig (else --store-server, else the in-cluster service account)')
    .option('--store-context <name>', '--store kubernetes: the kubeconfig context (default: its current one)')
    .option('--store-server <url>', '--store kubernetes: the API server URL, with --store-token-file')
    .option('--store-token-file <file>', '--store kubernetes: a file holding a bearer token for --store-server (re-read every minute)')
    .option('--store-ca-file <file>', '--store kubernetes: a CA bundle for --store-server')
    .option('--store-skip-tls-verify', '--store kubernetes: do not verify --store-server (tests; required for http://)')
    .option(
      '--store-namespace <name>',
      '--store kubernetes: namespace of the Proxy objects (default: the context’s, in a cluster the service account’s, else default)',
    )
    .option('--provider-check-interval <duration>', 'how often each provider is checked; 0 turns checks off (at least 10s)', d.providerCheckInterval)
    .option('--provider-check-timeout <duration>', 'deadline of one check; 0 means min(15s, interval)', d.providerCheckTimeout)
    .option('--redis-url <url>', 'Redis to use: redis://[user:password@]host:port[/db], rediss:// for TLS (env REDIS_URL)', env.REDIS_URL)
    .option('--redis-cluster-nodes <list>', 'a Redis Cluster instead: seed nodes host:port,… (env REDIS_CLUSTER_NODES)', env.REDIS_CLUSTER_NODES)
    .option(
      '--redis-password-file <file>',
      'file holding the Redis password: the cluster’s, or a --redis-url’s without one (env REDIS_PASSWORD_FILE)',
      env.REDIS_PASSWORD_FILE,
    )
    .option(
      '--redis-ca-file <file>',
      'PEM CA certificates the Redis server’s TLS certificate must chain to (env REDIS_CA_FILE); implies TLS to cluster nodes',
      env.REDIS_CA_FILE,
    )
    .option('--redis-tls', 'TLS to the cluster nodes, verified against the system CAs (a --redis-url says rediss://)')
    .option(
      '--redis-lost-after <duration>',
      'how long Redis may stay unreachable before the process exits 1 for its supervisor to restart it; 0 waits for ever',
      d.redisLostAfter,
    )
    .option('--prefix <prefix>', 'hash-tagged key prefix of every queue and key', d.prefix)
    .option('--data-dir <dir>', 'where local state lives', d.dataDir)
    .option('--log-level <level>', 'trace, debug, info, warn, error or silent (env EGRESS_LOG_LEVEL)', env.EGRESS_LOG_LEVEL ?? d.logLevel)
    .option(
      '--log-format <format>',
      'auto, pretty or json: pretty is a line of text per entry and, without --log-level, warnings and errors only; auto is pretty when standard error is a terminal',
      d.logFormat,
    )
    .option('--shutdown-grace <duration>', 'how long running jobs get at shutdown before they are aborted', d.shutdownGrace)
    .option('--check-config', 'validate the flags and the configuration file, print a summary and exit')
    .option('--events-max-count <n>', 'events the fleet keeps at most (100 to 1000000); the oldest go first', d.eventsMaxCount)
    .option('--events-max-age <duration>', 'events older than this are dropped (1m to 2160h)', d.eventsMaxAge);
  if (role !== 'up' && role !== 'api') {
    cmd
      .option('--metrics-port <n>', 'serve /metrics and /healthz of this process on this port')
      .option('--host <address>', 'address the metrics listener binds; a non-loopback one requires --api-token-file', d.host)
      .option('--api-token-file <file>', 'file of bearer tokens the metrics listener accepts, one a line (as the API’s)')
      .option('--allow-open-token-file', 'use an --api-token-file that other users can read (warned in the log)');
  }
  if (role === 'up' || role === 'api') {
    cmd
      .option('--host <address>', 'address the API binds; a non-loopback one requires --api-token-file', d.host)
      .option('--port <n>', 'API port', d.port)
      .option('--api-token-file <file>', 'file of bearer tokens the API accepts, one a line (default: the data directory’s own api-token, made at start)')
      .option('--no-auth', 'no token at all, loopback only: every local user may then read proxy passwords and write (warned in the log)')
      .option('--allow-open-token-file', 'use a token file that other users can read (warned in the log)')
      .option('--max-body-size <size>', 'largest request body the API accepts (larger: 413), e.g. 1MiB, 512KiB', d.maxBodySize)
      .option(
        '--max-connections <n>',
        'connections the API holds at once (at most half the open-files limit); a share is kept for /healthz, /readyz and the echo',
        d.maxConnections,
      )
      .option('--max-connections-per-peer <n>', 'connections one client address may hold (outside the health reserve)', d.maxConnectionsPerPeer)
      .option(
        '--allowed-host <name>',
        'a Host name (optionally name:port) a loopback API serves (without --api-token-file), besides its address and localhost; repeatable',
        collect,
        [],
      )
      .option('--pick-session-ttl <duration>', 'a pick session not used for this long is forgotten (10s to 168h)', d.pickSessionTtl)
      .option(
        '--pick-cache <duration>',
        'how long the API keeps each pool’s Ready members before refreshing them (0 to 10s): the staleness of picks',
        d.pickCache,
      )
      .option('--feedback-block-cooldown <duration>', 'a member reported blocked for a domain is not picked for it for this long', d.feedbackBlockCooldown)
      .option(
        '--feedback-replace-domains <n>',
        'a member blocked on this many distinct domains within --feedback-replace-window is replaced',
        d.feedbackReplaceDomains,
      )
      .option('--feedback-replace-window <duration>', 'the window of the replacement rule', d.feedbackReplaceWindow)
      .option('--feedback-rate <n>', 'feedback reports per second each token may send (fractions allowed); more: 429', d.feedbackRate)
      .option('--feedback-burst <n>', 'feedback reports a token may send at once above the rate', d.feedbackBurst);
  }
  if (role === 'up' || role === 'worker') {
    cmd
      .option('--queues <list>', 'queues this worker processes, comma-separated', d.queues)
      .option('--concurrency <n>', 'jobs processed at once per queue', d.concurrency)
      .option('--lock-duration <duration>', 'job lock; a crashed worker’s job is taken over after about this long', d.lockDuration)
      .option('--stalled-interval <duration>', 'how often stalled jobs are looked for', d.stalledInterval)
      .option(
        '--echo-url <url>',
        `the API’s /v1/echo, which readiness probes reach through each proxy (default: ${role === 'up' ? 'this process’s API' : `http://127.0.0.1:${d.port}/v1/echo`})`,
      );
  }
  if (role === 'up' || role === 'scheduler') {
    cmd
      .option('--lease <duration>', 'scheduler leadership lease; a standby takes over within it', d.lease)
      .option('--gc-interval <duration>', 'how often each provider is swept for instances no proxy owns; 0 = never', d.gcInterval)
      .option('--resync-interval <duration>', 'how often every proxy is reconciled and re-probed without a change; 0 = never', d.resyncInterval);
  }
  if (role === 'up' || role === 'worker') {
    cmd
      .option('--gc-grace <duration>', 'instances younger than this are never garbage-collected', d.gcGrace)
      .option(
        '--gc-deletes-per-second <n>',
        "instance deletions a GC sweep starts per second on each provider (a provider's gc.deletesPerSecond overrides it)",
        d.gcDeletesPerSecond,
      )
      .option('--probe-interval <duration>', 'how often each Ready proxy is probed (jittered ±10 %); 0 = only on the resync', d.probeInterval)
      .option(
        '--probe-timeout <duration>',
        'deadline of each probe step (TCP connect, request through the proxy); at most half of --probe-interval',
        d.probeTimeout,
      )
      .option('--probe-failures <n>', 'failed readiness probes in a row that take a Ready proxy out of discovery', d.probeFailures)
      .option('--probe-successes <n>', 'passed probes in a row that bring an evicted proxy back into discovery', d.probeSuccesses)
      .option(
        '--replace-after <duration>',
        'a proxy unready this long has its instance replaced; a pool member Failed this long is replaced by a new member',
        d.replaceAfter,
      );
  }
  return cmd;
}
