/**
 * Traffic accounting of local proxies (docs/usage.md#traffic): real proxy hosts (and relays)
 * started by the local provider, real origins on loopback addresses counting what their
 * connections carried, so the proxy's counts are compared with what was really sent and received.
 */
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';
import type { InstanceSpec } from '../../src/providers/lifecycle.ts';
import { createLocalProvider } from '../../src/providers/local/index.ts';
import { instanceDir, readJson } from '../../src/providers/local/instance-files.ts';
import { createLocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { findHostProcesses } from '../../src/providers/local/process-table.ts';
import { asTrafficStats, TRAFFIC_STATS_FILE, type TrafficStats } from '../../src/providers/local/traffic-stats.ts';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import type { Provider } from '../../src/providers/types.ts';
import type { TrafficCounts } from '../../src/usage/usage-types.ts';
import { stopProxyHosts } from '../support/local-host.ts';
import { getThroughProxy } from '../support/proxy-get.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { closingGet, countingOrigin, socksExchange, tunnelExchange, type CountingOrigin } from '../support/traffic-clients.ts';
import { waitFor } from '../support/wait.ts';

const CREDS: ProxyCredentials = { username: 'crawler', password: 'traffic-pass' };
const signal = (): AbortSignal => AbortSignal.timeout(30_000);
const spec = (name: string, proxy: string): InstanceSpec => ({ name, owner: { fleet: 'traffic', proxy }, credentials: CREDS });
const LOOPBACK = { egressPolicy: { allow: ['127.0.0.0/8'], deny: [] } };

const origins: CountingOrigin[] = [];
const dataDirs: string[] = [];
const closings: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  for (const host of ['127.0.0.1', '127.0.0.2', '127.0.0.3']) origins.push(await countingOrigin(host));
});

afterAll(async () => {
  await Promise.all(origins.map((o) => o.close()));
});

afterEach(async () => {
  for (const close of closings.splice(0)) await close();
  for (const dir of dataDirs.splice(0)) await stopProxyHosts(dir);
});

const origin = (i: number): CountingOrigin => origins[i]!;

async function trafficOf(dataDir: string, instance: string): Promise<TrafficStats | undefined> {
  return asTrafficStats(await readJson(join(instanceDir(dataDir, instance), TRAFFIC_STATS_FILE)).catch(() => undefined));
}

/** Waits until `instance`'s file shows `want` of `field` for `domain`; the file then. */
async function waitForCount(dataDir: string, instance: string, domain: string, field: keyof TrafficCounts, want: number): Promise<TrafficStats> {
  return waitFor(`${domain}'s ${field} to reach ${want}`, async () => {
    const stats = await trafficOf(dataDir, instance);
    return stats?.domains[domain]?.[field] === want ? stats : undefined;
  });
}

async function localProvider(name: string, registry: Registry, relayProcesses?: number): Promise<{ provider: Provider; dataDir: string }> {
  const dataDir = await tempDir(`egress-traffic-${name}-`);
  dataDirs.push(dataDir);
  const provider = createLocalProvider(
    { name, type: 'local', dataDir, proxies: { ...LOOPBACK, ...(relayProcesses !== undefined ? { relayProcesses } : {}) } },
    {
      logger: silentLogger(),
      registry,
      dataDir,
      proxyResolver: (instance) => Promise.resolve(instance === 'ep-blue-1' ? { proxy: 'blue-1', pool: 'blue' } : undefined),
    },
  );
  closings.push(() => provider.close());
  return { provider, dataDir };
}

describe('traffic through a local proxy', () => {
  it('counts plain HTTP, CONNECT and SOCKS5 by destination, bytes as the origins saw them; a denied destination counts nothing', async () => {
    const { provider, dataDir } = await localProvider('traffic-kinds', new Registry(), 0);
    const { endpoint } = await provider.lifecycle!.ensureInstance(spec('ep-kinds', 'kinds'), signal());
    const port = endpoint!.port;
    const proxy = { port, ...CREDS };
    const [a, b, c] = [origin(0), origin(1), origin(2)];
    const before = [a, b, c].map((o) => ({ up: o.received(), down: o.sent() }));

    expect((await getThroughProxy(proxy, `http://${a.host}:${a.port}/one`)).status).toBe(200);
    expect((await getThroughProxy(proxy, `http://${a.host}:${a.port}/two?q=1`)).body).toHaveLength(1000);
    const tunnelled = await tunnelExchange(port, CREDS, `${b.host}:${b.port}`, closingGet(b.host, b.port, '/in-tunnel', 'x'.repeat(5000)));
    expect(tunnelled.status).toBe(200);
    expect(tunnelled.answer).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(await socksExchange(port, CREDS, c.host, c.port, closingGet(c.host, c.port, '/in-socks'))).toMatch(/^HTTP\/1\.1 200 OK/);
    expect((await getThroughProxy(proxy, 'http://169.254.169.254/computeMetadata/v1/')).status).toBe(403);
    expect((await tunnelExchange(port, CREDS, '169.254.169.254:443', '')).status).toBe(403);

    await waitForCount(dataDir, 'ep-kinds', a.host, 'requests', 2);
    await waitForCount(dataDir, 'ep-kinds', b.host, 'tunnels', 1);
    const stats = await waitForCount(dataDir, 'ep-kinds', c.host, 'tunnels', 1);
    // Each origin's connections carried exactly what the proxy counted for its destination.
    const grew = [a, b, c].map((o, i) => ({ bytesUp: o.received() - before[i]!.up, bytesDown: o.sent() - before[i]!.down }));
    expect(stats.domains[a.host]).toEqual({ ...grew[0], requests: 2, tunnels: 0 });
    expect(stats.domains[b.host]).toEqual({ ...grew[1], requests: 0, tunnels: 1 });
    expect(stats.domains[c.host]).toEqual({ ...grew[2], requests: 0, tunnels: 1 });
    // The tunnel's payload: the 5000-byte body went up inside it, the 1000-byte answer came down.
    expect(grew[1]!.bytesUp).toBeGreaterThan(5000);
    expect(grew[1]!.bytesDown).toBeGreaterThan(1000);
    expect(Object.keys(stats.domains).sort()).toEqual([a.host, b.host, c.host]);
  });

  it('counts a relay’s traffic with the host’s, and keeps host names in lower case', async () => {
    const { provider, dataDir } = await localProvider('traffic-relay', new Registry(), 1);
    const { endpoint } = await provider.lifecycle!.ensureInstance(spec('ep-relayed', 'relayed'), signal());
    const [host] = await findHostProcesses(dataDir);
    const a = origin(0);
    // The host stopped: only its relay accepts, and counts for it.
    process.kill(host!, 'SIGSTOP');
    try {
      expect((await getThroughProxy({ port: endpoint!.port, ...CREDS }, `http://${a.host}:${a.port}/via-relay`)).status).toBe(200);
    } finally {
      process.kill(host!, 'SIGCONT');
    }
    await waitForCount(dataDir, 'ep-relayed', a.host, 'requests', 1);
    expect((await tunnelExchange(endpoint!.port, CREDS, `LocalHost:${a.port}`, closingGet(a.host, a.port))).status).toBeGreaterThan(0);
    const stats = await waitForCount(dataDir, 'ep-relayed', 'localhost', 'tunnels', 1);
    expect(Object.keys(stats.domains)).not.toContain('LocalHost');
  });

  it('keeps at most the bound of distinct domains; the rest counts as `other`', async () => {
    const dataDir = await tempDir('egress-traffic-bound-');
    dataDirs.push(dataDir);
    const lifecycle = createLocalLifecycle({
      dataDir,
      logger: silentLogger(),
      egressPolicy: proxyEgressPolicy(LOOPBACK.egressPolicy, undefined),
      trafficDomains: 2,
    });
    closings.push(() => lifecycle.close());
    const { endpoint } = await lifecycle.ensureInstance(spec('ep-bound', 'bound'), signal());
    const proxy = { port: endpoint!.port, ...CREDS };
    for (const [i, o] of origins.entries()) {
      expect((await getThroughProxy(proxy, `http://${o.host}:${o.port}/`)).status).toBe(200);
      await waitFor(`request ${i + 1} counted`, async () => {
        const domains = Object.values((await trafficOf(dataDir, 'ep-bound'))?.domains ?? {});
        return domains.reduce((n, d) => n + d.requests, 0) === i + 1;
      });
    }
    expect((await getThroughProxy(proxy, `http://${origin(2).host}:${origin(2).port}/again`)).status).toBe(200);
    const stats = await waitForCount(dataDir, 'ep-bound', 'other', 'requests', 2);
    expect(Object.keys(stats.domains).sort()).toEqual([origin(0).host, origin(1).host, 'other']);
    expect(stats.domains[origin(0).host]?.requests).toBe(1);
  });
});

describe('the traffic metrics', () => {
  it('grow by provider and pool, and never go down when the proxy host restarts', async () => {
    const registry = new Registry();
    const { provider, dataDir } = await localProvider('traffic-metric', registry);
    const { endpoint } = await provider.lifecycle!.ensureInstance(spec('ep-blue-1', 'blue-1'), signal());
    const a = origin(0);
    const value = async (metric: string, label: string, want: string): Promise<number> => {
      const got = await registry.getSingleMetric(metric)!.get();
      return got.values.find((v) => v.labels.provider === 'traffic-metric' && v.labels.pool === 'blue' && v.labels[label] === want)?.value ?? 0;
    };
    const requests = (): Promise<number> => value('proxy_operator_proxy_traffic_total', 'kind', 'request');
    expect((await getThroughProxy({ port: endpoint!.port, ...CREDS }, `http://${a.host}:${a.port}/m`)).status).toBe(200);
    await waitFor('one request in the metric', async () => (await requests()) === 1);
    const down = await value('proxy_operator_proxy_traffic_bytes_total', 'direction', 'down');
    expect(down).toBeGreaterThan(1000);
    expect(await value('proxy_operator_proxy_traffic_bytes_total', 'direction', 'up')).toBeGreaterThan(0);
    expect(await registry.metrics()).toMatch(/proxy_operator_proxy_traffic_total\{provider="traffic-metric",pool="blue",kind="request"\} 1\n/);

    // The host dies and comes back: its counts start over, the exported counters go on from where they were.
    const [pid] = await findHostProcesses(dataDir);
    process.kill(pid!, 'SIGKILL');
    await waitFor('the proxy host gone', async () => !(await findHostProcesses(dataDir)).includes(pid!));
    const again = await provider.lifecycle!.ensureInstance(spec('ep-blue-1', 'blue-1'), signal());
    expect((await tunnelExchange(again.endpoint!.port, CREDS, `${a.host}:${a.port}`, closingGet(a.host, a.port))).status).toBe(200);
    await waitFor('the tunnel in the metric', async () => (await value('proxy_operator_proxy_traffic_total', 'kind', 'tunnel')) === 1);
    expect(await requests()).toBe(1);
    expect(await value('proxy_operator_proxy_traffic_bytes_total', 'direction', 'down')).toBeGreaterThan(down);
  });
});
