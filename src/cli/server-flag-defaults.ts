/**
 * The defaults of the long-running commands' flags, as strings the way a user would type them: the
 * one place they are stated. Commander shows them (server-commands.ts) and the flags' schemas apply
 * them (server-flags.ts). Kept apart from those schemas (which load zod, and server-config.ts the
 * providers' config schemas) so that building the command tree for `egress --help` costs nothing
 * but this table.
 */
import { DEFAULT_PREFIX } from '../../queues/names.ts';

export const SERVER_FLAG_DEFAULTS = {
  store: 'redis',
  providerCheckInterval: '1m',
  providerCheckTimeout: '0',
  prefix: DEFAULT_PREFIX,
  dataDir: '.egress',
  logLevel: 'info',
  logFormat: 'auto',
  shutdownGrace: '10s',
  redisLostAfter: '5m',
  host: '127.0.0.1',
  port: '8080',
  maxBodySize: '1MiB',
  maxConnections: '1024',
  maxConnectionsPerPeer: '256',
  queues: 'checks,reconcile,gc',
  gcInterval: '5m',
  gcGrace: '10m',
  gcDeletesPerSecond: '5',
  resyncInterval: '30s',
  probeFailures: '1',
  probeSuccesses: '2',
  probeInterval: '5s',
  probeTimeout: '2s',
  replaceAfter: '5m',
  concurrency: '10',
  lockDuration: '30s',
  stalledInterval: '30s',
  lease: '15s',
  eventsMaxCount: '10000',
  eventsMaxAge: '24h',
  pickSessionTtl: '30m',
  pickCache: '1s',
  feedbackBlockCooldown: '30m',
  feedbackReplaceDomains: '3',
  feedbackReplaceWindow: '10m',
  feedbackRate: '20',
  feedbackBurst: '100',
} as const;
