import { request } from 'node:http';
import { connect } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/temp-dirs.ts';

/** GET `url` through the forward proxy at `proxyUrl` (userinfo = Basic Proxy-Authorization). */
function getThroughProxy(proxyUrl: string, url: string, withCredentials = true): Promise<{ status: number; body: string }> {
  const proxy = new URL(proxyUrl);
  const auth = Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64');
  return new Promise((resolve, reject) => {
    // Host names the target, as any client of a forward proxy sends it (the API refuses a Host that is not its own).
    const host = new URL(url).host;
    const req = request(
      {
        host: proxy.hostname,
        port: Number(proxy.port),
        method: 'GET',
        path: url,
        headers: withCredentials ? { host, 'proxy-authorization': `Basic ${auth}` } : { host },
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The pid of the process listening on a loopback TCP port (from /proc/net/tcp and the fd links). */
async function pidListeningOn(port: number): Promise<number | undefined> {
  const { readFile, readdir, readlink } = await import('node:fs/promises');
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const line = (await readFile('/proc/net/tcp', 'utf8')).split('\n').find((l) => l.includes(`:${hexPort} `) && l.trim().split(/\s+/)[3] === '0A');
  const inode = line?.trim().split(/\s+/)[9];
  if (!inode) return undefined;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) if ((await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')) === `socket:[${inode}]`) return Number(pid);
  }
  return undefined;
}

function portOpen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('a proxy’s whole life on the local provider', () => {
  let roles: RunningRoles;
  let api: string;

  beforeAll(async () => {
    roles = await runRoles(
      testConfig({ queues: ['checks', 'reconcile'], intervalMs: 60_000, resyncMs: 300 }),
      ['publisher', 'worker', 'scheduler', 'api'],
      silentLogger(),
    );
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    // Remove anything a failed assertion left running.
    const { items } = (await (await fetch(`${api}/v1/proxies`)).json()) as { items: ProxyView[] };
    for (const p of items) await fetch(`${api}/v1/proxies/${p.name}`, { method: 'DELETE' });
    await waitFor('every proxy gone', async () => ((await (await fetch(`${api}/v1/proxies`)).json()) as { items: unknown[] }).items.length === 0, 30_000);
    await roles.close();
  });

  test('apply, Ready, traffic through the discovered URL (refused without credentials), delete, gone', async () => {
    const dir = await tempDir('egress-e2e-proxy-');
    const file = join(dir, 'proxy.yaml');
    await writeFile(file, 'kind: Proxy\nmetadata: { name: web-1, labels: { team: crawl } }\nspec: { provider: local }\n');
    expect(await runCli(['apply', '-f', file, '--api-url', api])).toMatchObject({ code: 0, out: 'proxy/web-1 created\n' });

    const ready = await waitFor(
      'web-1 to be Ready',
      async () => {
        const { items } = (await (await fetch(`${api}/v1/proxies?ready=true&label=team=crawl`)).json()) as { items: ProxyView[] };
        return items[0];
      },
      30_000,
    );
    expect(ready.status).toMatchObject({ phase: 'Ready', egressIp: '127.0.0.1', observedGeneration: 1 });
    expect(ready.status.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const proxyUrl = ready.proxyUrl ?? '';
    expect(proxyUrl).toMatch(/^http:\/\/egress-web-1:[^@]+@127\.0\.0\.1:\d+$/);

    const through = await getThroughProxy(proxyUrl, `${api}/v1/echo`);
    expect(through.status).toBe(200);
    expect(JSON.parse(through.body)).toEqual({ address: '127.0.0.1' });
    expect((await getThroughProxy(proxyUrl, `${api}/v1/echo`, false)).status).toBe(407);

    const text = await (await fetch(`${api}/v1/proxies?ready=true&format=text`)).text();
    expect(text).toBe(`${proxyUrl}\n`);
    const metrics = await (await fetch(`${api}/metrics`)).text();
    expect(metrics).toContain('proxy_operator_proxies{provider="local",phase="Ready"} 1');
    expect(metrics).toContain('proxy_operator_proxies{provider="local",phase="Failed"} 0');
    expect(metrics).toMatch(/proxy_operator_reconciles_total\{provider="local",outcome="ready"\} [1-9]/);

    // Self-healing: the proxy's process dies; the local provider's exit watch notices at once (the
    // periodic resync would too) and the next reconcile brings a working proxy back behind the same
    // discovered URL.
    const view = (await fetch(`${api}/v1/proxies/web-1`).then((r) => r.json())) as ProxyView;
    const pidBefore = await waitFor('the proxy process', () => pidListeningOn(Number(new URL(proxyUrl).port)));
    process.kill(pidBefore, 'SIGKILL');
    const healed = await waitFor(
      'a new proxy process',
      async () => {
        const pid = await pidListeningOn(Number(new URL(proxyUrl).port)).catch(() => undefined);
        return pid !== undefined && pid !== pidBefore ? pid : undefined;
      },
      30_000,
    );
    expect(healed).not.toBe(pidBefore);
    expect(view.status.instanceName).toMatch(/^ep-web-1-[0-9a-f]{8}$/);
    await waitFor('traffic to flow again', async () => (await getThroughProxy(proxyUrl, `${api}/v1/echo`).catch(() => ({ status: 0 }))).status === 200, 30_000);

    const endpoint = new URL(proxyUrl);
    expect(await runCli(['delete', 'proxy', 'web-1', '--api-url', api])).toMatchObject({ code: 0 });
    await waitFor('web-1 to be gone', async () => (await fetch(`${api}/v1/proxies/web-1`)).status === 404, 30_000);
    expect(await portOpen(endpoint.hostname, Number(endpoint.port))).toBe(false);
  });
});
