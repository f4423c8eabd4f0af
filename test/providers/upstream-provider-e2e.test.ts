/**
 * The upstream provider with every part real (issue 24): the roles in one process, the fronts in
 * the proxy host, and real vendors on loopback — tinyproxy and squid with Basic auth, dante as a
 * SOCKS5 server. Each endpoint becomes a Proxy `<provider>-<endpoint>` that crawlers use with our
 * URL and our credentials; a wrong vendor password is `Unauthorized` in ProviderHealth and its
 * proxy is never Ready; a killed vendor leaves discovery; an endpoint dropped from the endpoints
 * file loses its Proxy; and the vendors' passwords appear in no log line, event, API answer,
 * status or file of the provider's data directory.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { createLogger } from '../../src/logging.ts';
import { upstreamProviderSchema } from '../../src/providers/upstream/config.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { testConfig } from '../support/config.ts';
import { hasTool } from '../support/required-tools.ts';
import { getThroughProxy } from '../support/proxy-get.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { danteVendor, squidVendor, tinyproxyVendor, type VendorProxy } from '../support/vendor-proxies.ts';
import { waitFor } from '../support/wait.ts';
import { stopProxyHosts } from '../support/local-host.ts';

const run = promisify(execFile);
const TINY_PASSWORD = 'tiny-vendor-secret-1';
const SQUID_PASSWORD = 'squid-vendor-secret-2';
const WRONG_PASSWORD = 'wrong-vendor-secret-3';

interface HealthTarget {
  name: string;
  ready: boolean;
  reason: string;
  message: string;
}

/** Every file under `dir`, recursively, as text (sockets and the like skipped). */
async function filesUnder(dir: string): Promise<{ path: string; text: string }[]> {
  const out: { path: string; text: string }[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    out.push({ path, text: await readFile(path, 'utf8').catch(() => '') });
  }
  return out;
}

const tools = await Promise.all([hasTool('tinyproxy'), hasTool('squid'), hasTool('danted')]);
const present = tools.every(Boolean) && process.getuid?.() === 0;
if (!present && process.env.CI === 'true')
  throw new Error('the upstream provider suite needs tinyproxy, squid and dante-server, as root (as .ci/run installs and runs)');

describe.skipIf(!present)("upstream provider: vendors' proxies in the fleet", { timeout: 120_000 }, () => {
  let tiny: VendorProxy;
  let squid: VendorProxy;
  let dante: VendorProxy;
  let origin: Server;
  let originPort = 0;
  let roles: RunningRoles;
  let api = '';
  let dataDir = '';
  let endpointsFile = '';
  const logLines: string[] = [];

  beforeAll(async () => {
    const dir = await tempDir('egress-upstream-');
    tiny = await tinyproxyVendor(await tempDir('vendor-tiny-'), 'alice', TINY_PASSWORD);
    squid = await squidVendor(await tempDir('vendor-squid-'), 'bob', SQUID_PASSWORD);
    dante = await danteVendor(await tempDir('vendor-dante-'));
    origin = createServer((req, res) => res.end(`origin: ${req.url}`));
    origin.listen(0, '127.0.0.1');
    await once(origin, 'listening');
    originPort = (origin.address() as AddressInfo).port;

    const secret = async (name: string, text: string): Promise<string> => {
      const path = join(dir, name);
      await writeFile(path, `${text}\n`, { mode: 0o600 });
      return path;
    };
    endpointsFile = join(dir, 'endpoints.txt');
    // The dante endpoint comes from the file, password and all (the file is as private as a password file).
    await writeFile(endpointsFile, `# vendor list\nd1 socks5://${dante.user}:${dante.password}@127.0.0.1:${dante.port}\n`, { mode: 0o600 });
    dataDir = join(dir, 'data');
    const provider = upstreamProviderSchema.parse({
      name: 'vendor',
      type: 'upstream',
      dataDir,
      labels: { vendor: 'loopback' },
      endpoints: [
        { name: 't1', url: `http://alice@127.0.0.1:${tiny.port}`, passwordFile: await secret('tiny', TINY_PASSWORD), labels: { tier: 'datacenter' } },
        { name: 's1', url: `http://bob@127.0.0.1:${squid.port}`, passwordFile: await secret('squid', SQUID_PASSWORD), labels: { tier: 'residential' } },
        { name: 'bad', url: `http://bob@127.0.0.1:${squid.port}`, passwordFile: await secret('wrong', WRONG_PASSWORD) },
      ],
      endpointsFile,
      // The loopback origin is inside: the provider's policy must allow it, as for any provider.
      proxies: { egressPolicy: { allow: ['127.0.0.1/32'] } },
    });
    const capture = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    // No secret registry on this logger: a password must not be written at all, not only be redacted.
    const logger = createLogger({ level: 'debug', destination: capture });
    const config = testConfig({
      providers: [provider],
      queues: ['checks', 'reconcile'],
      intervalMs: 500,
      resyncMs: 500,
      readiness: { intervalMs: 500, timeoutMs: 2000 },
    });
    roles = await runRoles(config, ['publisher', 'worker', 'scheduler', 'api'], logger);
    api = roles.api?.url ?? '';
  }, 120_000);

  afterAll(async () => {
    if (api) {
      const { items } = (await (await fetch(`${api}/v1/proxies`)).json()) as { items: ProxyView[] };
      // Dropped from the list first, or the resync would make them again.
      await writeFile(endpointsFile, '');
      for (const p of items) await fetch(`${api}/v1/proxies/${p.name}`, { method: 'DELETE' });
      await waitFor(
        'every proxy gone',
        async () => ((await (await fetch(`${api}/v1/proxies`)).json()) as { items: unknown[] }).items.length === 0,
        60_000,
      ).catch(() => undefined);
    }
    await roles?.close();
    // The configured endpoints' Proxies are declared again by any resync that ran meanwhile, and
    // their fronts outlive the roles by design: the proxy host this suite caused is stopped here.
    if (dataDir) await stopProxyHosts(dataDir);
    await new Promise((resolve) => origin?.close(resolve));
    await Promise.all([tiny?.stop(), squid?.stop(), dante?.stop()]);
  }, 120_000);

  const readyUrls = async (): Promise<Map<string, string>> => {
    const { items } = (await (await fetch(`${api}/v1/proxies?ready=true`)).json()) as { items: ProxyView[] };
    return new Map(items.flatMap((p) => (p.proxyUrl ? [[p.name, p.proxyUrl] as const] : [])));
  };

  test("each endpoint is a Proxy <provider>-<endpoint> with its labels, and the good ones carry a crawler's request to the origin", async () => {
    const urls = await waitFor(
      'the three good endpoints Ready',
      async () => {
        const m = await readyUrls();
        return ['vendor-t1', 'vendor-s1', 'vendor-d1'].every((n) => m.has(n)) ? m : undefined;
      },
      60_000,
    );
    const t1 = (await (await fetch(`${api}/v1/proxies/vendor-t1`)).json()) as ProxyView;
    expect(t1.labels).toMatchObject({ tier: 'datacenter', vendor: 'loopback', 'egress-proxies.io/declared-by': 'vendor' });
    for (const name of ['vendor-t1', 'vendor-s1', 'vendor-d1']) {
      const url = urls.get(name)!;
      // Our front on loopback, with our credentials: nothing of the vendor's.
      expect(new URL(url).hostname).toBe('127.0.0.1');
      expect(url).not.toContain(String(tiny.port));
      const answer = await getThroughProxy(url, `http://127.0.0.1:${originPort}/via-${name}`);
      expect(answer).toEqual({ status: 200, body: `origin: /via-${name}` });
    }
  });

  test('discovery hands out SOCKS5 URLs (scheme=socks5) on the same ports, and a SOCKS5 client goes through the front and the vendor', async () => {
    const http = await waitFor('vendor-s1 Ready', async () => (await readyUrls()).get('vendor-s1'), 60_000);
    const text = await (await fetch(`${api}/v1/proxies?ready=true&format=text&scheme=socks5`)).text();
    const lines = text.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l).toMatch(/^socks5:\/\/[^:]+:[^@]+@127\.0\.0\.1:\d+$/);
    const socks = http.replace(/^http:/, 'socks5:');
    expect(lines).toContain(socks);
    const { stdout } = await run('curl', ['-sS', '--max-time', '20', '-x', socks, `http://127.0.0.1:${originPort}/socks-via-squid`]);
    expect(stdout).toBe('origin: /socks-via-squid');
    expect((await fetch(`${api}/v1/proxies?scheme=gopher`)).status).toBe(400);
  });

  test("the egress policy still judges what a crawler asks for, and each upstream's denials, failures and bytes are counted", async () => {
    const urls = await waitFor('vendor-s1 Ready', async () => (await readyUrls()).get('vendor-s1'), 60_000);
    // The metadata address is denied by default whatever the vendor would do with it: refused before it.
    const denied = await getThroughProxy(urls, 'http://169.254.169.254/latest/meta-data/');
    expect(denied.status).toBe(403);
    const value = (text: string, series: string): number =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(`${series} `))
          ?.slice(series.length + 1) ?? 0,
      );
    const metrics = await waitFor(
      'the counts exported',
      async () => {
        const text = await (await fetch(`${api}/metrics`)).text();
        return value(text, 'proxy_operator_upstream_bytes_total{provider="vendor",proxy="vendor-s1",direction="received"}') > 0 &&
          value(text, 'proxy_operator_upstream_failures_total{provider="vendor",proxy="vendor-bad",kind="upstream-auth"}') > 0 &&
          text.includes('proxy_operator_upstream_denied_total{provider="vendor",proxy="vendor-s1",reason=')
          ? text
          : undefined;
      },
      30_000,
    );
    expect(metrics).toContain('proxy_operator_upstream_bytes_total{provider="vendor",proxy="vendor-d1",direction="received"}');
  });

  test('a wrong vendor password is Unauthorized in ProviderHealth, and its proxy is not Ready', async () => {
    const targets = await waitFor(
      'ProviderHealth of every endpoint',
      async () => {
        const res = await fetch(`${api}/v1/providerhealths/vendor`);
        if (res.status !== 200) return undefined;
        const ph = (await res.json()) as { status?: { targets?: HealthTarget[] } };
        const list = ph.status?.targets ?? [];
        return ['t1', 's1', 'd1', 'bad'].every((t) => list.some((x) => x.name === t)) ? list : undefined;
      },
      60_000,
    );
    const byName = new Map(targets.map((t) => [t.name, t]));
    for (const good of ['t1', 's1', 'd1']) expect(byName.get(good)).toMatchObject({ ready: true, reason: 'Ok' });
    expect(byName.get('bad')).toMatchObject({ ready: false, reason: 'Unauthorized' });
    expect(byName.get('bad')?.message).toContain('407');
    const bad = (await (await fetch(`${api}/v1/proxies/vendor-bad`)).json()) as ProxyView;
    expect(bad.status.phase).not.toBe('Ready');
    expect((await readyUrls()).has('vendor-bad')).toBe(false);
  });

  test('a killed vendor leaves discovery', async () => {
    await waitFor('vendor-t1 Ready', async () => (await readyUrls()).has('vendor-t1'), 60_000);
    tiny.kill();
    await waitFor('vendor-t1 out of discovery', async () => !(await readyUrls()).has('vendor-t1'), 60_000);
    const t1 = (await (await fetch(`${api}/v1/proxies/vendor-t1`)).json()) as ProxyView;
    expect(t1.status.phase).not.toBe('Ready');
  });

  test('an endpoint dropped from the endpoints file loses its Proxy', async () => {
    await writeFile(endpointsFile, '# nothing listed any more\n');
    await waitFor('vendor-d1 gone', async () => (await fetch(`${api}/v1/proxies/vendor-d1`)).status === 404, 60_000);
  });

  test("the vendors' passwords appear in no log line, event, API answer, status or file of the data directory", async () => {
    const answers = await Promise.all(
      [
        '/v1/proxies',
        '/v1/proxies?ready=true',
        '/v1/proxies?ready=true&format=text',
        '/v1/providerhealths',
        '/v1/providerhealths/vendor',
        '/v1/events',
        '/v1/pools',
      ].map(async (path) => `${path}: ${await (await fetch(`${api}${path}`)).text()}`),
    );
    const files = await filesUnder(dataDir);
    expect(files.length).toBeGreaterThan(0);
    expect(logLines.length).toBeGreaterThan(0);
    for (const password of [TINY_PASSWORD, SQUID_PASSWORD, WRONG_PASSWORD, dante.password]) {
      const basic = Buffer.from(password).toString('base64');
      for (const line of logLines) expect(line).not.toContain(password);
      for (const text of answers) expect(text).not.toContain(password);
      for (const f of files) expect(f.text, f.path).not.toContain(password);
      for (const line of logLines) expect(line).not.toContain(basic);
    }
  });
});
