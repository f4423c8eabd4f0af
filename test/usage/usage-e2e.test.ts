/**
 * Usage from end to end, as an operator sees it: a pool's member on the local provider (a real
 * proxy process) carries a crawler's request; the worker's collector stores what the proxy counted,
 * the lifecycle's events store the member's life, and `GET /v1/usage` answers the traffic by
 * domain and the pool's instance time and cost from the configured prices.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig } from '../../src/config/app.ts';
import { priceTableSchema } from '../../src/config/usage-config.ts';
import { silentLogger } from '../../src/logging.ts';
import { POOL_LABEL, type Pool } from '../../src/model/pool-resource.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { localProviderSchema } from '../../src/providers/local/config.ts';
import { testConfig } from '../support/config.ts';
import { stopProxyHosts } from '../support/local-host.ts';
import { getThroughProxy } from '../support/proxy-get.ts';
import { countingOrigin, type CountingOrigin } from '../support/traffic-clients.ts';
import { waitFor } from '../support/wait.ts';
import type { UsageReport } from '../../src/usage/usage-store.ts';

type UsageAnswer = Pick<UsageReport, 'currency' | 'rows'>;

describe('usage from a real proxy to GET /v1/usage', () => {
  let roles: RunningRoles;
  let api: string;
  // Not 127.0.0.1: the readiness probes' echo is there, and their traffic is counted under that domain.
  let origin: CountingOrigin;
  const base = testConfig({ queues: ['reconcile'], concurrency: 4, lockDurationMs: 10_000, readiness: { intervalMs: 0 } });
  const config = freezeConfig({
    ...base,
    providers: [localProviderSchema.parse({ name: 'local', type: 'local', proxies: { egressPolicy: { allow: ['127.0.0.0/8'] } } })],
    prices: priceTableSchema.parse({ currency: 'EUR', instanceHour: { local: { default: 36 } }, egressGB: { local: 1000 } }),
    usage: { maxDomainsPerPoolHour: 50, retentionMs: 86_400_000, collectIntervalMs: 1000 },
  });
  const usage = async (groupBy: string): Promise<UsageAnswer> => {
    const res = await fetch(`${api}/v1/usage?groupBy=${groupBy}`);
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as UsageAnswer;
  };

  beforeAll(async () => {
    origin = await countingOrigin('127.0.0.2', 2000);
    roles = await runRoles(config, ['worker', 'api'], silentLogger());
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await fetch(`${api}/v1/pools/metered`, { method: 'DELETE' });
    await waitFor('the pool gone', async () => ((await (await fetch(`${api}/v1/pools`)).json()) as { items: Pool[] }).items.length === 0, 60_000);
    await roles.close();
    await stopProxyHosts(`${config.dataDir}/local/local`);
    await origin.close();
  });

  test("a member's traffic by domain, and the pool's instance time and cost", async () => {
    const applied = await fetch(`${api}/v1/pools`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'ProxyPool', metadata: { name: 'metered' }, spec: { replicas: 1, template: { spec: { provider: 'local' } } } }),
    });
    expect(applied.status, await applied.clone().text()).toBe(200);
    const label = encodeURIComponent(`${POOL_LABEL}=metered`);
    await waitFor(
      'a Ready member',
      async () => ((await (await fetch(`${api}/v1/proxies?ready=true&label=${label}`)).json()) as { items: ProxyView[] }).items.length === 1,
      60_000,
    );
    const pick = (await (await fetch(`${api}/v1/pools/metered/pick`)).json()) as { proxyUrl: string };

    const [up0, down0] = [origin.received(), origin.sent()];
    for (let i = 0; i < 3; i++) expect((await getThroughProxy(pick.proxyUrl, `http://127.0.0.2:${origin.port}/page-${i}`)).status).toBe(200);
    const carried = { up: origin.received() - up0, down: origin.sent() - down0 };

    const byDomain = await waitFor('the requests stored', async () => {
      const row = (await usage('domain')).rows.find((r) => r.key === '127.0.0.2');
      return row && row.requests === 3 ? row : undefined;
    });
    expect(byDomain).toMatchObject({ bytesUp: carried.up, bytesDown: carried.down, tunnels: 0 });

    const report = await usage('pool');
    expect(report.currency).toBe('EUR');
    const pool = report.rows.find((r) => r.key === 'metered');
    expect(pool?.instances).toBe(1);
    expect(pool?.instanceSeconds).toBeGreaterThan(0);
    // 36 EUR an hour is a cent a second (instanceSeconds is whole seconds, the cost is not); the probes' and the crawler's bytes at 1000 EUR per GB.
    expect(Math.abs((pool?.cost.instances ?? 0) - ((pool?.instanceSeconds ?? 0) * 36) / 3600)).toBeLessThanOrEqual(0.01);
    expect(pool?.cost.egress).toBeGreaterThanOrEqual(((carried.up + carried.down) * 1000) / 1e9);
    expect(pool?.cost.total).toBeCloseTo((pool?.cost.instances ?? 0) + (pool?.cost.egress ?? 0), 9);
  });
});
