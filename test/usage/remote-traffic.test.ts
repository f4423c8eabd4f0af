/**
 * The traffic of remote proxies (docs/usage.md#traffic): the proxy program in container mode (as
 * VMs and pods run it) counts what it carries in memory and answers its counts to its own
 * `GET http://egress-proxy.invalid/traffic`; the remote traffic source of a kvm provider reads them
 * through the proxy store's Ready proxies, once each, across a worker restart and a proxy restart,
 * and only in the worker holding the fleet's lease.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { kvmProviderSchema } from '../../src/providers/kvm/config.ts';
import { buildProxyProgram } from '../../src/providers/local/proxy-program.ts';
import { TRAFFIC_REPORT_URL } from '../../src/providers/local/traffic-report.ts';
import { fleetOf, instanceNameFor } from '../../src/proxies/instance-name.ts';
import { RemoteBaselines } from '../../src/proxies/remote-baselines.ts';
import { remoteTrafficSources } from '../../src/proxies/remote-traffic.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import type { InstanceTraffic, TrafficSource } from '../../src/usage/traffic-source.ts';
import { uniquePrefix } from '../support/config.ts';
import { ALLOW_LOOPBACK_POLICY, startContainerProgram, stopChild } from '../support/container-program.ts';
import { getThroughProxy } from '../support/proxy-get.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { closingGet, countingOrigin, socksExchange, tunnelExchange, type CountingOrigin } from '../support/traffic-clients.ts';
import { waitFor } from '../support/wait.ts';

const PROVIDER = kvmProviderSchema.parse({
  name: 'kvm-a',
  type: 'kvm',
  hosts: [{ name: 'h', address: '127.0.0.1', privateKeyFile: '/k', insecureIgnoreHostKey: true }],
});

let program: string;
let origin: CountingOrigin;
let redis: Redis;
let prefix: string;
let store: RedisProxyStore;
let proxy: Proxy;
let credentials: ProxyCredentials;
let port: number;
let child: ChildProcess | undefined;
const workers: RemoteBaselines[] = [];

async function startContainer(): Promise<void> {
  child = await startContainerProgram(program, port, credentials);
}

const stopContainer = (): Promise<void> => stopChild(child);

function report(creds: ProxyCredentials = credentials): Promise<{ status: number; body: string }> {
  return getThroughProxy({ port, ...creds }, TRAFFIC_REPORT_URL);
}

async function sendRequests(n: number): Promise<void> {
  for (let i = 0; i < n; i++) expect((await getThroughProxy({ port, ...credentials }, `http://127.0.0.1:${origin.port}/r${i}`)).status).toBe(200);
}

/** One worker's source of the kvm provider (its own claimant of the lease). */
function worker(leaseMs = 60_000): TrafficSource {
  const baselines = new RemoteBaselines(redis, prefix);
  workers.push(baselines);
  const [source] = remoteTrafficSources([PROVIDER], { proxies: store, baselines, fleet: fleetOf(prefix), logger: silentLogger(), leaseMs });
  if (!source) throw new Error('no remote source for a kvm provider');
  return source;
}

/** What one read found of the container's proxy: its instance, proxy and the origin's domain. */
function ofOrigin(read: InstanceTraffic[]): { instance: string; proxy: string | undefined; requests: number; bytesUp: number; bytesDown: number }[] {
  return read.map((t) => {
    const c = t.domains.get('127.0.0.1');
    return { instance: t.instance, proxy: t.proxy, requests: c?.requests ?? 0, bytesUp: c?.bytesUp ?? 0, bytesDown: c?.bytesDown ?? 0 };
  });
}

/** One request written as is (with the proxy's Proxy-Authorization and Connection: close added) to the proxy; its whole answer. */
async function rawThroughProxy(proxyPort: number, c: ProxyCredentials, head: string): Promise<string> {
  const socket = connect(proxyPort, '127.0.0.1');
  socket.setEncoding('latin1');
  await once(socket, 'connect');
  let answer = '';
  socket.on('data', (chunk: string) => (answer += chunk));
  socket.write(`${head}Proxy-Authorization: Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}\r\nConnection: close\r\n\r\n`);
  await once(socket, 'close');
  return answer;
}

beforeAll(async () => {
  program = await buildProxyProgram(await tempDir('egress-remote-traffic-'));
  origin = await countingOrigin('127.0.0.1', 700);
  redis = new Redis(inject('redisUrl'));
  prefix = uniquePrefix();
  store = new RedisProxyStore(redis, prefix);
  ({ proxy } = await store.apply({ metadata: { name: 'r1', labels: {} }, spec: { provider: PROVIDER.name } }));
  credentials = (await store.credentials('r1'))!;
  port = await freePort();
  await store.updateStatus('r1', (p) => ({ ...p.status, phase: 'Ready', url: `http://127.0.0.1:${port}` }));
  await startContainer();
});

/** Every worker stops (gives the lease up). */
async function stopWorkers(): Promise<void> {
  await Promise.all(workers.splice(0).map((w) => w.release(AbortSignal.timeout(5_000))));
}

afterAll(async () => {
  await stopContainer();
  await stopWorkers();
  await origin.close();
  redis.disconnect();
});

describe('the proxy program in container mode', () => {
  it('answers its own counts to GET http://egress-proxy.invalid/traffic with its credentials, 407 without, and never forwards it', async () => {
    const before = JSON.parse((await report()).body) as { pid: number; startedAt: string; domains: Record<string, unknown> };
    expect(before).toMatchObject({ pid: child?.pid, startedAt: expect.any(String) as string });
    const received = origin.received();
    await sendRequests(2);
    const answer = await report();
    expect(answer.status).toBe(200);
    const after = JSON.parse(answer.body) as {
      pid: number;
      startedAt: string;
      domains: Record<string, { requests: number; bytesUp: number; bytesDown: number }>;
    };
    expect(after.startedAt).toBe(before.startedAt);
    const grew = (after.domains['127.0.0.1']?.bytesUp ?? 0) - ((before.domains['127.0.0.1'] as { bytesUp: number } | undefined)?.bytesUp ?? 0);
    expect(grew).toBe(origin.received() - received);
    // The report is no traffic: it is not counted, and no other domain appears for it.
    expect(Object.keys(after.domains)).toEqual(['127.0.0.1']);

    expect(await report({ username: credentials.username, password: 'wrong' })).toMatchObject({ status: 407 });
    expect((await getThroughProxy({ port, username: '', password: '' }, TRAFFIC_REPORT_URL)).status).toBe(407);
    expect((await getThroughProxy({ port, ...credentials }, 'http://egress-proxy.invalid/other')).status).toBe(404);
    expect(Object.keys((JSON.parse((await report()).body) as { domains: object }).domains)).toEqual(['127.0.0.1']);
  });

  it('answers the report to nothing but a plain GET with its credentials: CONNECT, SOCKS5 or another method reach no counts, and the name ignores case', async () => {
    // A tunnel to the reserved host is judged like any destination: `.invalid` never resolves, so it is refused, never answered.
    const tunnel = await tunnelExchange(port, credentials, 'egress-proxy.invalid:80', closingGet('egress-proxy.invalid', 80, '/traffic'));
    expect(tunnel.status).not.toBe(200);
    expect(tunnel.answer).toBe('');
    const socks = await socksExchange(port, credentials, 'egress-proxy.invalid', 80, closingGet('egress-proxy.invalid', 80, '/traffic')).catch(
      (err: unknown) => (err as Error).message,
    );
    expect(socks).not.toContain('startedAt');
    // A method other than GET is a 404 from the proxy itself; the name in another case is the same name (host names ignore case), still behind the credentials.
    const post = await rawThroughProxy(
      port,
      credentials,
      'POST http://egress-proxy.invalid/traffic HTTP/1.1\r\nHost: egress-proxy.invalid\r\nContent-Length: 0\r\n',
    );
    expect(post).toMatch(/^HTTP\/1\.1 404 /);
    expect(post).not.toContain('startedAt');
    const upper = 'GET http://EGRESS-PROXY.INVALID/traffic HTTP/1.1\r\nHost: EGRESS-PROXY.INVALID\r\n';
    expect(await rawThroughProxy(port, credentials, upper)).toMatch(/^HTTP\/1\.1 200 /);
    const refused = await rawThroughProxy(port, { username: credentials.username, password: 'wrong' }, upper);
    expect(refused).toMatch(/^HTTP\/1\.1 407 /);
    expect(refused).not.toContain('startedAt');
  });

  it('takes --traffic-domains: a malformed bound exits 2 naming the flag, 0 turns accounting and the report off', async () => {
    const env = { PATH: process.env.PATH ?? '', PROXY_HOST: '127.0.0.1', PROXY_USER: 'u', PROXY_PASSWORD: 'p', EGRESS_PROXY_POLICY: ALLOW_LOOPBACK_POLICY };
    const bad = spawn(process.execPath, [program, '--env', '--traffic-domains', 'many'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...env, PROXY_PORT: String(await freePort()) },
    });
    let stderr = '';
    bad.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(bad, 'exit')) as [number];
    expect({ code, stderr }).toEqual({ code: 2, stderr: 'proxy process: --traffic-domains: expected a whole number 0-10000\n' });

    const offPort = await freePort();
    const off = spawn(process.execPath, [program, '--env', '--traffic-domains', '0'], { stdio: 'ignore', env: { ...env, PROXY_PORT: String(offPort) } });
    try {
      const creds = { port: offPort, username: 'u', password: 'p' };
      await waitFor('the proxy without accounting to serve', async () => (await getThroughProxy(creds, `http://127.0.0.1:${origin.port}/off`)).status === 200);
      // Not answered by the proxy: judged like any destination, and `.invalid` never resolves.
      expect((await getThroughProxy(creds, TRAFFIC_REPORT_URL)).status).toBe(403);
    } finally {
      const exited = once(off, 'exit');
      off.kill('SIGTERM');
      await exited;
    }
  });
});

describe('the remote traffic source', () => {
  it('reads what each Ready proxy carried exactly once, and a restarted worker reads nothing twice', async () => {
    const first = worker();
    await first.read(); // whatever the proxy carried so far
    await first.commit?.();
    const [up, down] = [origin.received(), origin.sent()];
    await sendRequests(3);
    expect(ofOrigin(await first.read())).toEqual([
      { instance: instanceNameFor(fleetOf(prefix), proxy), proxy: 'r1', requests: 3, bytesUp: origin.received() - up, bytesDown: origin.sent() - down },
    ]);
    expect(await first.read()).toEqual([]);
    await first.commit?.();
    await stopWorkers();

    await sendRequests(1);
    const second = worker();
    expect(ofOrigin(await second.read()).map((t) => t.requests)).toEqual([1]);
    await second.commit?.();
    await stopWorkers();
  });

  it('collects in one worker at a time: another reads nothing while the lease is held, then takes over from the kept baselines', async () => {
    const holder = worker();
    const other = worker();
    await sendRequests(2);
    expect(ofOrigin(await holder.read()).map((t) => t.requests)).toEqual([2]);
    expect(await other.read()).toEqual([]);
    // The holder dies after reading, before the store took it: the next holder reads that again, and nothing more.
    await sendRequests(1);
    await redis.del(`${prefix}:usage:remote-collector:${PROVIDER.name}`);
    expect(ofOrigin(await other.read()).map((t) => t.requests)).toEqual([3]);
    await other.commit?.();
    // The old holder lost the lease: it reads nothing and keeps nothing.
    expect(await holder.read()).toEqual([]);
    await holder.commit?.();
    expect(await other.read()).toEqual([]);
    // The other stops; the old holder takes over from what the other kept.
    await workers[1]?.release(AbortSignal.timeout(5_000));
    await sendRequests(1);
    expect(ofOrigin(await holder.read()).map((t) => t.requests)).toEqual([1]);
    await stopWorkers();
  });

  it('a worker whose lease expired between a read and the store taking it, and that takes it again, does not read that twice', async () => {
    const source = worker();
    await source.read();
    await source.commit?.();
    await sendRequests(2);
    expect(ofOrigin(await source.read()).map((t) => t.requests)).toEqual([2]); // pending in the collector: the store failed
    await redis.del(`${prefix}:usage:remote-collector:${PROVIDER.name}`); // a stall outlasted the lease; nobody else took it
    await sendRequests(1);
    expect(ofOrigin(await source.read()).map((t) => t.requests)).toEqual([1]);
    await source.commit?.();
    await stopWorkers();
  });

  it('reads a restarted proxy from zero, skips a proxy that does not answer without failing the read, and forgets a deleted proxy', async () => {
    const source = worker();
    const closed = await freePort();
    await source.read();
    await source.commit?.();
    await sendRequests(1);
    await stopContainer(); // what it carried since the last read dies with it (counted in memory only)
    await startContainer();
    await sendRequests(2);
    await store.apply({ metadata: { name: 'down', labels: {} }, spec: { provider: PROVIDER.name } });
    await store.updateStatus('down', (p) => ({ ...p.status, phase: 'Ready', url: `http://127.0.0.1:${closed}` }));
    await store.apply({ metadata: { name: 'not-a-proxy', labels: {} }, spec: { provider: PROVIDER.name } });
    await store.updateStatus('not-a-proxy', (p) => ({ ...p.status, phase: 'Ready', url: `http://127.0.0.1:${origin.port}` }));
    const read = await source.read();
    expect(ofOrigin(read).map((t) => [t.proxy, t.requests])).toEqual([['r1', 2]]);
    await source.commit?.();

    const baselines = `${prefix}:usage:remote-baselines:${PROVIDER.name}`;
    const uids = async (): Promise<string[]> => Object.keys(await redis.hgetall(baselines)).filter((field) => field !== '~writer');
    expect(await uids()).toEqual([proxy.metadata.uid]);
    await store.remove('r1');
    expect(await source.read()).toEqual([]);
    await source.commit?.();
    expect(await uids()).toEqual([]);
    await stopWorkers();
  });
});
