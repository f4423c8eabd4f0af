/**
 * Real Redis peers beyond the run's shared redis-server, started by the tests that need them
 * (not the global setup, so other suites do not pay for them): a six-node Redis Cluster (three
 * masters, three replicas, a password) and a TLS-only redis-server with a CA made for the test.
 * Everything lives under a temporary directory (TMPDIR is the run's); `stop()` ends every
 * redis-server started and removes it, and a failed start stops what it had started.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import type { RedisNode } from '../../queues/connection.ts';
import { confString, freePort, startRedisChild, type RedisChild } from '../../src/redis/redis-server.ts';
import { waitFor } from './wait.ts';

const run = promisify(execFile);

/** Cluster bus ports are port + 10000 unless given: pick both, so ephemeral ports above 55535 work. */
async function nodePorts(): Promise<{ port: number; bus: number }> {
  return { port: await freePort(), bus: await freePort() };
}

async function withNode<T>(node: RedisNode, password: string, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: node.host, port: node.port, password, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

interface NodeLine {
  id: string;
  node: RedisNode;
  master: boolean;
  masterId: string;
  slots: [number, number][];
}

/** `CLUSTER NODES` as seen by one node. */
function parseNodes(text: string): NodeLine[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id = '', address = '', flags = '', masterId = '', , , , , ...slots] = line.split(' ');
      const hostPort = address.split('@')[0] ?? '';
      const i = hostPort.lastIndexOf(':');
      return {
        id,
        node: { host: hostPort.slice(0, i), port: Number(hostPort.slice(i + 1)) },
        master: flags.split(',').includes('master'),
        masterId,
        slots: slots
          .filter((s) => !s.startsWith('['))
          .map((s) => {
            const [a = '0', b = a] = s.split('-');
            return [Number(a), Number(b)] as [number, number];
          }),
      };
    });
}

export interface RedisClusterPeer {
  /** Every node (masters and replicas); any of them is a seed. */
  readonly nodes: readonly RedisNode[];
  readonly password: string;
  /** The master that serves `key`'s slot now, and its replica. */
  shardOf(key: string): Promise<{ master: RedisNode; replica: RedisNode }>;
  /**
   * Promotes the replica of the master serving `key` (`CLUSTER FAILOVER` on the replica: the
   * manual, lossless kind) and waits until every node agrees it is the master.
   */
  failover(key: string): Promise<{ from: RedisNode; to: RedisNode }>;
  /**
   * SIGKILLs the master serving `key` once its replica has every write it acknowledged, then
   * waits until the other nodes have promoted that replica (after `cluster-node-timeout`).
   */
  killMaster(key: string): Promise<{ killed: RedisNode; promoted: RedisNode }>;
  /** SIGKILLs the master serving `key` and its replica, and waits until the live nodes say `cluster_state:fail`. */
  killShard(key: string): Promise<void>;
  stop(): Promise<void>;
}

/** Three masters and three replicas on 127.0.0.1, `requirepass` and `masterauth` set, a 1 s node timeout. */
export async function startRedisCluster(): Promise<RedisClusterPeer> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-redis-cluster-'));
  const password = randomBytes(18).toString('base64url');
  const children: RedisChild[] = [];
  const stop = async (): Promise<void> => {
    await Promise.allSettled(children.map((c) => c.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const started = await Promise.allSettled(
      Array.from({ length: 6 }, async (_, i) => {
        // A port found free can be taken by another suite before redis-server binds it ("Address
        // already in use"): a node that fails to start is tried again on other ports, twice at most.
        for (let attempt = 1; ; attempt++) {
          const { port, bus } = await nodePorts();
          try {
            const child = await startRedisChild({
              dir: join(dir, `node-${i}-${attempt}`),
              appendOnly: false,
              port,
              password,
              extraConfig: [
                'cluster-enabled yes',
                'cluster-config-file nodes.conf',
                `cluster-port ${bus}`,
                'cluster-node-timeout 1000',
                `masterauth ${confString(password)}`,
              ],
            });
            children.push(child);
            return child;
          } catch (err) {
            if (attempt >= 3 || (err as { code?: unknown }).code !== 'ERR_REDIS_START') throw err;
          }
        }
      }),
    );
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const nodes = children.map((c) => ({ host: '127.0.0.1', port: c.port }));
    // The password reaches redis-cli through its environment, never its command line.
    await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `${n.host}:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'], {
      env: { ...process.env, REDISCLI_AUTH: password },
      timeout: 30_000,
    });
    await waitFor(
      'every cluster node to report cluster_state:ok',
      async () => {
        for (const node of nodes) {
          const info = await withNode(node, password, (r) => r.cluster('INFO'));
          if (!String(info).includes('cluster_state:ok')) return false;
        }
        return true;
      },
      30_000,
      50,
    );

    /** Asks the first node that answers (one may have been killed). */
    const anyNode = async <T>(fn: (redis: Redis) => Promise<T>): Promise<T> => {
      let last: unknown;
      for (const node of nodes) {
        try {
          return await withNode(node, password, fn);
        } catch (err) {
          last = err;
        }
      }
      throw last;
    };
    const view = async (): Promise<NodeLine[]> => parseNodes(String(await anyNode((r) => r.cluster('NODES'))));
    const shardOf = async (key: string): Promise<{ master: RedisNode; replica: RedisNode; masterLine: NodeLine; replicaLine: NodeLine }> => {
      const slot = Number(await anyNode((r) => r.cluster('KEYSLOT', key)));
      const lines = await view();
      const masterLine = lines.find((l) => l.master && l.slots.some(([a, b]) => slot >= a && slot <= b));
      const replicaLine = lines.find((l) => !l.master && masterLine !== undefined && l.masterId === masterLine.id);
      if (!masterLine || !replicaLine) throw new Error(`no master with a replica serves slot ${slot}`);
      return { master: masterLine.node, replica: replicaLine.node, masterLine, replicaLine };
    };
    return {
      nodes,
      password,
      async shardOf(key) {
        const { master, replica } = await shardOf(key);
        return { master, replica };
      },
      async failover(key) {
        const before = await shardOf(key);
        await withNode(before.replica, password, (r) => r.cluster('FAILOVER'));
        await waitFor(
          'the replica to be master on every node',
          async () => {
            for (const node of nodes) {
              const lines = parseNodes(String(await withNode(node, password, (r) => r.cluster('NODES'))));
              const promoted = lines.find((l) => l.id === before.replicaLine.id);
              const demoted = lines.find((l) => l.id === before.masterLine.id);
              if (!promoted?.master || demoted?.master !== false) return false;
            }
            return true;
          },
          30_000,
          50,
        );
        return { from: before.master, to: before.replica };
      },
      async killMaster(key) {
        const before = await shardOf(key);
        const offset = async (node: RedisNode, field: string): Promise<number> => {
          const info = String(await withNode(node, password, (r) => r.info('replication')));
          return Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? -1);
        };
        await waitFor(
          'the replica to have every write of its master',
          async () => (await offset(before.replica, 'slave_repl_offset')) >= (await offset(before.master, 'master_repl_offset')),
          10_000,
          20,
        );
        const child = children.find((c) => c.port === before.master.port);
        if (!child) throw new Error(`no redis-server of ours on port ${before.master.port}`);
        process.kill(child.pid, 'SIGKILL');
        const alive = nodes.filter((n) => n.port !== before.master.port);
        await waitFor(
          'the replica to be promoted on every live node',
          async () => {
            for (const node of alive) {
              const lines = parseNodes(String(await withNode(node, password, (r) => r.cluster('NODES'))));
              if (!lines.find((l) => l.id === before.replicaLine.id)?.master) return false;
              if (!String(await withNode(node, password, (r) => r.cluster('INFO'))).includes('cluster_state:ok')) return false;
            }
            return true;
          },
          30_000,
          50,
        );
        return { killed: before.master, promoted: before.replica };
      },
      async killShard(key) {
        const { master, replica } = await shardOf(key);
        for (const node of [master, replica]) {
          const child = children.find((c) => c.port === node.port);
          if (!child) throw new Error(`no redis-server of ours on port ${node.port}`);
          process.kill(child.pid, 'SIGKILL');
        }
        const alive = nodes.filter((n) => n.port !== master.port && n.port !== replica.port);
        await waitFor(
          'the live nodes to report cluster_state:fail',
          async () => {
            for (const node of alive) if (!String(await withNode(node, password, (r) => r.cluster('INFO'))).includes('cluster_state:fail')) return false;
            return true;
          },
          30_000,
          50,
        );
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface TlsRedisPeer {
  /** `rediss://:password@127.0.0.1:PORT`: TLS only (no plain port), verified against `caFile`. */
  readonly url: string;
  readonly port: number;
  readonly password: string;
  /** The PEM CA that signed the server's certificate (for 127.0.0.1). */
  readonly caFile: string;
  /** A second CA that signed nothing this server shows. */
  readonly otherCaFile: string;
  readonly dir: string;
  stop(): Promise<void>;
}

async function openssl(dir: string, args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir, timeout: 30_000 });
}

/** A self-signed CA (EC P-256, two days): `<dir>/<name>.crt` and `<name>.key`. */
export async function makeCa(dir: string, name: string): Promise<void> {
  await openssl(dir, [
    'req',
    '-x509',
    '-new',
    '-nodes',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
  ]);
}

/** A redis-server listening with TLS only, its certificate signed by a CA generated here. */
export async function startTlsRedis(): Promise<TlsRedisPeer> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-redis-tls-'));
  let child: RedisChild | undefined;
  const stop = async (): Promise<void> => {
    await child?.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await makeCa(dir, 'egress-test-ca');
    await makeCa(dir, 'other-ca');
    await openssl(dir, [
      'req',
      '-new',
      '-nodes',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      '/CN=127.0.0.1',
    ]);
    await writeFile(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1\n');
    await openssl(dir, [
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'egress-test-ca.crt',
      '-CAkey',
      'egress-test-ca.key',
      '-CAcreateserial',
      '-out',
      'server.crt',
      '-days',
      '2',
      '-extfile',
      'server.ext',
    ]);
    const password = randomBytes(18).toString('base64url');
    const port = await freePort();
    const file = (name: string): string => confString(join(dir, name));
    child = await startRedisChild({
      dir: join(dir, 'redis'),
      appendOnly: false,
      password,
      // `port 0` after ours: no plain-TCP listener at all.
      extraConfig: [
        'port 0',
        `tls-port ${port}`,
        `tls-cert-file ${file('server.crt')}`,
        `tls-key-file ${file('server.key')}`,
        `tls-ca-cert-file ${file('egress-test-ca.crt')}`,
        'tls-auth-clients no',
      ],
    });
    return {
      url: `rediss://:${password}@127.0.0.1:${port}`,
      port,
      password,
      caFile: join(dir, 'egress-test-ca.crt'),
      otherCaFile: join(dir, 'other-ca.crt'),
      dir,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
