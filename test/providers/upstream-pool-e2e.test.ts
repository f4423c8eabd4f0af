/**
 * A ProxyPool across kinds (issue 24): its `spread` mixes the local provider and an upstream
 * provider by weight. The pool's members on the upstream provider are fronts to the vendor's
 * endpoint (chosen by hash among those listed), each with its own sticky vendor session through
 * the endpoint's username template, so a pick's session keeps one member and so one vendor
 * session. Crawlee crawls through the mixed pool. The vendor here is a forward proxy of our own
 * core with Basic auth that records the usernames it is sent (tinyproxy and squid take one fixed
 * user, which a session template cannot be tested against).
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Configuration, HttpCrawler, ProxyConfiguration } from '@crawlee/http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { listenForwardProxy, type ForwardProxy } from '../../src/forward-proxy/server.ts';
import { silentLogger } from '../../src/logging.ts';
import { POOL_LABEL } from '../../src/model/pool-resource.ts';
import { localProviderSchema } from '../../src/providers/local/config.ts';
import { upstreamProviderSchema } from '../../src/providers/upstream/config.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { testConfig } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';
import { stopProxyHosts } from '../support/local-host.ts';

const run = promisify(execFile);
const VENDOR_PASSWORD = 'pool-vendor-secret';

describe('a pool mixing the local provider and a vendor', { timeout: 120_000 }, () => {
  let vendor: ForwardProxy;
  const vendorUsers: string[] = [];
  let origin: Server;
  let originPort = 0;
  const originHits: string[] = [];
  let roles: RunningRoles;
  let api = '';
  let dataDir = '';

  beforeAll(async () => {
    const dir = await tempDir('egress-upstream-pool-');
    vendor = await listenForwardProxy({
      host: '127.0.0.1',
      port: 0,
      admit: (c) => {
        if (c) vendorUsers.push(c.username);
        const ok = c !== undefined && c.password === VENDOR_PASSWORD && /^crawl-session-[a-z0-9]+$/.test(c.username);
        return Promise.resolve(ok ? { allowed: true } : { allowed: false, status: 407, message: 'vendor credentials required' });
      },
      generation: () => 1,
      maxConnections: 64,
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 5_000,
    });
    origin = createServer((req, res) => {
      originHits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<html><body>page ${req.url}</body></html>`);
    });
    origin.listen(0, '127.0.0.1');
    await once(origin, 'listening');
    originPort = (origin.address() as AddressInfo).port;
    const passwordFile = join(dir, 'vendor-password');
    await writeFile(passwordFile, VENDOR_PASSWORD, { mode: 0o600 });
    const allowLoopback = { egressPolicy: { allow: ['127.0.0.1/32'] } };
    const providers = [
      localProviderSchema.parse({ name: 'local', type: 'local', proxies: allowLoopback }),
      upstreamProviderSchema.parse({
        name: 'vendor',
        type: 'upstream',
        passwordFile,
        usernameTemplate: '{user}-session-{session}',
        endpoints: [{ name: 'gw', url: `http://crawl@127.0.0.1:${vendor.port}`, labels: { tier: 'residential' } }],
        proxies: allowLoopback,
      }),
    ];
    dataDir = join(dir, 'data');
    const config = testConfig({
      dataDir,
      providers,
      queues: ['reconcile'],
      concurrency: 4,
      lockDurationMs: 10_000,
      resyncMs: 1000,
      readiness: { intervalMs: 0 },
    });
    roles = await runRoles(config, ['worker', 'scheduler', 'api'], silentLogger());
    api = roles.api?.url ?? '';
  }, 120_000);

  afterAll(async () => {
    if (api) {
      await fetch(`${api}/v1/pools/mix`, { method: 'DELETE' });
      await waitFor('the pool gone', async () => ((await (await fetch(`${api}/v1/pools`)).json()) as { items: unknown[] }).items.length === 0, 60_000).catch(
        () => undefined,
      );
      const { items } = (await (await fetch(`${api}/v1/proxies`)).json()) as { items: ProxyView[] };
      for (const p of items) await fetch(`${api}/v1/proxies/${p.name}`, { method: 'DELETE' });
      await waitFor(
        'every proxy gone',
        async () => ((await (await fetch(`${api}/v1/proxies`)).json()) as { items: unknown[] }).items.length === 0,
        60_000,
      ).catch(() => undefined);
    }
    await roles?.close();
    // The vendor endpoint's own Proxy is declared again by any resync that ran meanwhile, and fronts
    // outlive the roles by design: the proxy hosts this suite caused are stopped here.
    if (dataDir) for (const sub of ['upstream/vendor', 'local/local']) await stopProxyHosts(join(dataDir, sub));
    await vendor?.close();
    await new Promise((resolve) => origin?.close(resolve));
  }, 120_000);

  const members = async (): Promise<ProxyView[]> =>
    ((await (await fetch(`${api}/v1/proxies?ready=true&label=${encodeURIComponent(`${POOL_LABEL}=mix`)}`)).json()) as { items: ProxyView[] }).items;

  test('spread by weight over both kinds; each vendor member is its own vendor session; a pick session keeps its member; Crawlee crawls through the pool', async () => {
    const res = await fetch(`${api}/v1/pools`, {
      method: 'POST',
      headers: { 'content-type': 'application/yaml' },
      body: 'kind: ProxyPool\nmetadata: { name: mix }\nspec:\n  replicas: 4\n  template: { metadata: { labels: { team: crawl } }, spec: {} }\n  spread: [{ provider: local, weight: 1, labels: { tier: datacenter } }, { provider: vendor, weight: 1, labels: { tier: residential } }]\n  tiers: [datacenter, residential]\n',
    });
    expect(res.status).toBe(200);
    const ready = await waitFor('4 Ready members', async () => ((await members()).length === 4 ? members() : undefined), 90_000);
    const byProvider = new Map<string, string[]>();
    for (const m of ready) byProvider.set(m.spec.provider, [...(byProvider.get(m.spec.provider) ?? []), m.name]);
    expect(byProvider.get('local')).toHaveLength(2);
    expect(byProvider.get('vendor')).toHaveLength(2);

    // Each vendor member reached the vendor as a session of its own (the readiness probe went through it).
    const sessions = new Set(vendorUsers.filter((u) => u.startsWith('crawl-session-')));
    for (const name of byProvider.get('vendor') ?? []) expect(sessions).toContain(`crawl-session-${name.replace(/[^a-z0-9]/g, '')}`);

    // Tiers: a crawler starts on datacenter (the local members), is told after a ban where to escalate, and moves there.
    const tierPick = async (tier: string): Promise<{ proxy: string; outcome: string; tier: string }> =>
      (await (await fetch(`${api}/v1/pools/mix/pick?session=s2&tier=${tier}`)).json()) as { proxy: string; outcome: string; tier: string };
    const dc = await tierPick('datacenter');
    expect(byProvider.get('local')).toContain(dc.proxy);
    const ban = await fetch(`${api}/v1/pools/mix/feedback`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ outcome: 'blocked', domain: 'shop.example', session: 's2' }),
    });
    expect(await ban.json()).toMatchObject({ proxy: dc.proxy, nextTier: 'residential' });
    const res2 = await tierPick('residential');
    expect(byProvider.get('vendor')).toContain(res2.proxy);
    expect(res2.tier).toBe('residential');

    // A pick's session sticks to one member.
    const pick = async (): Promise<{ proxy: string; proxyUrl: string }> =>
      (await (await fetch(`${api}/v1/pools/mix/pick?session=s1`)).json()) as { proxy: string; proxyUrl: string };
    const first = await pick();
    expect((await pick()).proxy).toBe(first.proxy);
    // The same member as SOCKS5 (same port, same credentials), for clients that prefer it.
    const socks = (await (await fetch(`${api}/v1/pools/mix/pick?session=s1&format=text&scheme=socks5`)).text()).trim();
    expect(socks).toBe(first.proxyUrl.replace(/^http:/, 'socks5:'));
    const { stdout } = await run('curl', ['-sS', '--max-time', '20', '-x', socks, `http://127.0.0.1:${originPort}/over-socks5`]);
    expect(stdout).toBe('<html><body>page /over-socks5</body></html>');

    // Crawlee, with the pool's Ready members as its proxy URLs (discovery's text format).
    const urls = ready.map((m) => m.proxyUrl).filter((u): u is string => u !== undefined);
    expect(urls).toHaveLength(4);
    const fetched: string[] = [];
    const crawler = new HttpCrawler(
      {
        proxyConfiguration: new ProxyConfiguration({ proxyUrls: urls }),
        maxConcurrency: 2,
        maxRequestRetries: 1,
        requestHandler: ({ request, proxyInfo }) => {
          fetched.push(`${new URL(request.url).pathname} ${proxyInfo?.port ?? ''}`);
        },
      },
      new Configuration({ persistStorage: false, purgeOnStart: true }),
    );
    const pages = Array.from({ length: 8 }, (_, i) => `http://127.0.0.1:${originPort}/page-${i}`);
    await crawler.run(pages);
    expect(fetched.map((f) => f.split(' ')[0]).sort()).toEqual(pages.map((p) => new URL(p).pathname).sort());
    // The crawl went through more than one member, and the vendor's were among those used when they were picked.
    expect(new Set(fetched.map((f) => f.split(' ')[1])).size).toBeGreaterThan(1);
    for (const p of pages) expect(originHits).toContain(new URL(p).pathname);
  });
});
