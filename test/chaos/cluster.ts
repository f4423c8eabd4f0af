import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startRedisChild, freePort, type RedisChild } from '../../src/redis/redis-server.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { spawnEgress, type EgressProcess } from '../support/cli.ts';
import { startCloudHosts, type CloudHosts } from './cloud-hosts.ts';
import { startRelay, type Relay } from './relay.ts';

/**
 * The chaos suite's cluster: one private redis-server with append-only persistence, the kube and
 * Compute fakes in this process behind relays the fault schedule drives, a server playing the
 * Pods and VMs, and every role as a real `egress` process: 2 schedulers, 3 workers with mixed
 * `--queues`, 1 publisher, 1 API. Roles keep their flags across restarts (the API its port).
 */
export const PROVIDERS = ['local', 'k8s', 'gce'] as const;
export type ProviderName = (typeof PROVIDERS)[number];
export const CLOUD_PROVIDERS = ['k8s', 'gce'] as const;
export type CloudProvider = (typeof CLOUD_PROVIDERS)[number];

export const ROLE_NAMES = ['api', 'scheduler-1', 'scheduler-2', 'worker-1', 'worker-2', 'worker-3', 'publisher'] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

export const PROJECT = 'egress-chaos';
export const ZONE = 'us-central1-a';
export const NAMESPACE = 'proxies';

export interface ClusterTimings {
  /** `--provider-check-interval` (the product's minimum is 10 s). */
  checkInterval: string;
  resyncInterval: string;
  gcInterval: string;
  gcGrace: string;
  lease: string;
}

export const DEFAULT_TIMINGS: ClusterTimings = { checkInterval: '10s', resyncInterval: '3s', gcInterval: '5s', gcGrace: '5s', lease: '3s' };

export interface Role {
  readonly name: RoleName;
  /** The current process (the last one started). */
  proc: EgressProcess;
  /** Every process this role has had, the dead ones included (their logs are kept). */
  readonly history: EgressProcess[];
  /** SIGSTOPped and not yet continued. */
  stopped: boolean;
  /** The queues a worker consumes (empty for other roles). */
  readonly queues: readonly string[];
}

export interface ChaosCluster {
  readonly dir: string;
  readonly dataDir: string;
  readonly prefix: string;
  readonly api: string;
  readonly redisUrl: string;
  readonly kube: FakeKubeApiserver;
  readonly compute: FakeCompute;
  readonly relays: Record<CloudProvider, Relay>;
  readonly hosts: CloudHosts;
  readonly roles: Record<RoleName, Role>;
  readonly redisPid: () => number;
  /** Starts the role's process again (after a SIGKILL) and waits until it is up. */
  restart(role: RoleName): Promise<void>;
  /** SIGKILLs redis-server and starts it again on the same port and append-only file. */
  restartRedis(downMs: number): Promise<void>;
  /** Stops every role (SIGCONT first where stopped), the fakes, the relays and Redis. */
  close(): Promise<void>;
}

const WORKER_QUEUES: Record<'worker-1' | 'worker-2' | 'worker-3', string> = {
  'worker-1': 'checks,reconcile',
  'worker-2': 'reconcile,gc',
  'worker-3': 'checks,reconcile,gc',
};

function providersYaml(o: { kubeUrl: string; computePort: number; tokenFile: string; hostPort: number }): string {
  const k8s = {
    name: 'k8s',
    type: 'kubernetes',
    server: o.kubeUrl,
    tokenFile: o.tokenFile,
    skipTLSVerify: true,
    namespace: NAMESPACE,
    proxies: { port: o.hostPort },
  };
  const gce = {
    name: 'gce',
    type: 'gcp',
    project: PROJECT,
    zone: ZONE,
    accessTokenFile: o.tokenFile,
    apiEndpoint: '127.0.0.1',
    port: o.computePort,
    protocol: 'http',
    proxies: { image: 'projects/egress/global/images/family/forward-proxy', port: o.hostPort, firewall: { sourceRanges: ['127.0.0.0/8'] } },
  };
  return `providers:\n  - { name: local, type: local }\n  - ${JSON.stringify(k8s)}\n  - ${JSON.stringify(gce)}\n`;
}

const KUBE_500 = JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'chaos: injected 500', reason: 'InternalError', code: 500 });
const GCE_500 = JSON.stringify({
  error: { code: 500, message: 'chaos: injected 500', errors: [{ message: 'chaos: injected 500', domain: 'global', reason: 'backendError' }] },
});

export async function startChaosCluster(dir: string, timings: ClusterTimings = DEFAULT_TIMINGS): Promise<ChaosCluster> {
  const dataDir = join(dir, 'data');
  await mkdir(dataDir, { recursive: true });
  const tokenFile = join(dir, 'token');
  await writeFile(tokenFile, 'chaos-token\n');
  const redisDir = join(dir, 'redis');
  const password = randomBytes(18).toString('base64url');
  const redisPort = await freePort();
  const startRedis = (): Promise<RedisChild> => startRedisChild({ dir: redisDir, appendOnly: true, password, port: redisPort });
  let redis = await startRedis();
  const redisUrl = redis.url;

  const kube = await startFakeKubeApiserver({ tokens: { 'chaos-token': 'system:serviceaccount:egress:operator' } });
  kube.store.namespaces.add(NAMESPACE);
  const hosts = await startCloudHosts(kube, NAMESPACE);
  const compute = await startFakeCompute({ project: PROJECT, tokens: ['chaos-token'], externalIps: () => hosts.nextVmAddress() });
  hosts.serveVms(compute);
  const relays = { k8s: await startRelay(Number(new URL(kube.url).port), KUBE_500), gce: await startRelay(compute.port, GCE_500) };
  const configFile = join(dir, 'egress.yaml');
  await writeFile(configFile, providersYaml({ kubeUrl: `http://127.0.0.1:${relays.k8s.port}`, computePort: relays.gce.port, tokenFile, hostPort: hosts.port }));

  const prefix = `{chaos-${randomBytes(4).toString('hex')}}`;
  const apiPort = await freePort();
  const api = `http://127.0.0.1:${apiPort}`;
  const common = [
    '--config',
    configFile,
    '--prefix',
    prefix,
    '--data-dir',
    dataDir,
    '--shutdown-grace',
    '2s',
    '--provider-check-interval',
    timings.checkInterval,
  ];
  const env = { REDIS_URL: redisUrl, EGRESS_LOG_LEVEL: 'info', EGRESS_FROM_SOURCE: '1' };
  const argsOf = (name: RoleName): string[] => {
    // Tokenless (--no-auth, loopback): the chaos run is about faults, not authentication.
    if (name === 'api') return ['api', ...common, '--port', String(apiPort), '--no-auth'];
    if (name === 'publisher') return ['publisher', ...common];
    if (name.startsWith('scheduler'))
      return ['scheduler', ...common, '--lease', timings.lease, '--resync-interval', timings.resyncInterval, '--gc-interval', timings.gcInterval];
    const queues = WORKER_QUEUES[name as keyof typeof WORKER_QUEUES];
    return ['worker', ...common, '--queues', queues, '--concurrency', '4', '--lock-duration', '3s', '--stalled-interval', '1s'].concat([
      '--echo-url',
      `${api}/v1/echo`,
      '--gc-grace',
      timings.gcGrace,
      '--probe-interval',
      '2s',
      '--probe-timeout',
      '1s',
      '--replace-after',
      '30s',
    ]);
  };
  const readyLog = (name: RoleName): string | undefined =>
    name === 'api' ? 'api listening' : name.startsWith('worker') ? 'worker started' : name === 'publisher' ? 'publisher started' : undefined;

  const roles = {} as Record<RoleName, Role>;
  const spawnRole = async (name: RoleName): Promise<void> => {
    const proc = spawnEgress(argsOf(name), env);
    const role = roles[name];
    if (role) {
      role.proc = proc;
      role.history.push(proc);
      role.stopped = false;
    } else {
      const queues = name.startsWith('worker') ? WORKER_QUEUES[name as keyof typeof WORKER_QUEUES].split(',') : [];
      roles[name] = { name, proc, history: [proc], stopped: false, queues };
    }
    const text = readyLog(name);
    // A role that comes up while Redis is down waits for it; the schedule goes on meanwhile.
    if (text) await proc.waitForLog(text, 120_000);
  };
  await Promise.all(ROLE_NAMES.map(spawnRole));

  return {
    dir,
    dataDir,
    prefix,
    api,
    redisUrl,
    kube,
    compute,
    relays,
    hosts,
    roles,
    redisPid: () => redis.pid,
    restart: spawnRole,
    async restartRedis(downMs) {
      const pid = redis.pid;
      process.kill(pid, 'SIGKILL');
      await waitGone(pid);
      await new Promise((r) => setTimeout(r, downMs));
      redis = await startRedis();
    },
    async close() {
      for (const role of Object.values(roles)) if (role.stopped) role.proc.child.kill('SIGCONT');
      await Promise.all(Object.values(roles).map((r) => r.proc.stop()));
      for (const relay of Object.values(relays)) await relay.close();
      await hosts.close();
      await kube.close();
      await compute.close();
      await redis.stop();
    },
  };
}

/** Resolves once `pid` no longer exists (reaped). */
export async function waitGone(pid: number): Promise<void> {
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
