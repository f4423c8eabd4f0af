import { createIORedisClient, RedisConnection, type RedisOptions } from 'bullmq';
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { Cluster, Redis } from 'ioredis';

/** A node of a Redis Cluster, as given to `--redis-cluster-nodes`. */
export interface RedisNode {
  host: string;
  port: number;
}

/** One Redis server: a `redis://` or `rediss://` URL (user, password and db in it), and the CA for `rediss://`. */
export interface StandaloneTarget {
  kind: 'standalone';
  url: string;
  /** PEM CA certificates that sign the server's certificate (`--redis-ca-file`); the system's when absent. */
  ca?: string;
}

/** A Redis Cluster reached through any of its seed nodes; the other nodes are discovered. */
export interface ClusterTarget {
  kind: 'cluster';
  nodes: readonly RedisNode[];
  username?: string;
  password?: string;
  /** TLS to every node; `ca` as for a standalone target. */
  tls: boolean;
  ca?: string;
}

/** Where the roles' Redis is. A bare string is a standalone URL (tests, earlier callers). */
export type RedisTarget = StandaloneTarget | ClusterTarget;

/**
 * Marks BullMQ connection options that stand for a cluster: BullMQ builds only standalone
 * clients from options, so a client factory (installed on first use) builds the Cluster. A
 * symbol survives BullMQ's `Object.assign` of the options and never reaches ioredis.
 */
const CLUSTER = Symbol('egress.redisCluster');

type MarkedOptions = RedisOptions & { [CLUSTER]?: ClusterTarget };

function retryStrategy(times: number): number {
  return Math.max(Math.min(Math.exp(times), 20_000), 1000);
}

function tlsOptions(enabled: boolean, ca: string | undefined): TlsOptions | undefined {
  if (!enabled) return undefined;
  return ca === undefined ? {} : { ca };
}

function standaloneBase(target: StandaloneTarget): RedisOptions {
  const u = new URL(target.url);
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: Number(u.port || 6379),
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0,
    tls: tlsOptions(u.protocol === 'rediss:', target.ca),
    retryStrategy,
  };
}

/**
 * ioredis options for a Redis target, for one of the two kinds of connection BullMQ needs. For a
 * cluster they carry the cluster (see `createRedisClient`); BullMQ accepts them like any others.
 */
export function redisOptions(target: RedisTarget | string, kind: 'worker' | 'producer'): RedisOptions {
  const t: RedisTarget = typeof target === 'string' ? { kind: 'standalone', url: target } : target;
  let base: MarkedOptions;
  if (t.kind === 'standalone') {
    base = standaloneBase(t);
  } else {
    installClusterFactory();
    base = { retryStrategy, [CLUSTER]: t };
  }
  // Workers block on Redis and must never give up a command; producers fail fast so that an
  // API call or a CLI command reports Redis being down instead of hanging.
  return kind === 'worker' ? { ...base, maxRetriesPerRequest: null } : { ...base, maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 5000 };
}

/** An ioredis client (a Redis, or a Cluster for a cluster target) for options from `redisOptions`. */
export function createRedisClient(options: RedisOptions): Redis | Cluster {
  const cluster = (options as MarkedOptions)[CLUSTER];
  if (cluster === undefined) return new Redis(options);
  return new Cluster(
    cluster.nodes.map((n) => ({ host: n.host, port: n.port })),
    {
      redisOptions: {
        username: cluster.username,
        password: cluster.password,
        tls: tlsOptions(cluster.tls, cluster.ca),
        maxRetriesPerRequest: options.maxRetriesPerRequest,
        ...(typeof options.connectTimeout === 'number' ? { connectTimeout: options.connectTimeout } : {}),
      },
      enableOfflineQueue: options.enableOfflineQueue ?? true,
      clusterRetryStrategy: retryStrategy,
      // After a failover the old master answers MOVED and the client re-reads the slots; a short
      // refresh interval also notices a promotion it has not been told about yet.
      slotsRefreshInterval: 2000,
      // No ready check (CLUSTER INFO must say `cluster_state:ok`). While a dead master is not yet
      // replaced the check fails and ioredis reconnects, but the promise of the `connect()` that
      // ran the check never settles: BullMQ's worker, which awaits exactly that when it resets
      // its blocking connection, then stops taking jobs for good. Without the check, commands
      // sent meanwhile are answered CLUSTERDOWN and retried (`retryDelayOnClusterDown`).
      enableReadyCheck: false,
    },
  );
}

let factoryInstalled = false;

/**
 * Lets BullMQ build a Cluster from marked options, so that BullMQ still owns (and closes) every
 * connection it makes, as it does for a standalone Redis. Installed only by a process that uses
 * a cluster; unmarked options get what BullMQ would have built itself.
 */
function installClusterFactory(): void {
  if (factoryInstalled) return;
  factoryInstalled = true;
  RedisConnection.clientFactory = (opts) => createIORedisClient(createRedisClient(opts));
}
