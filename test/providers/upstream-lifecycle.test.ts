/**
 * The upstream provider's lifecycle without the roles: a front forwards through its vendor, a
 * rotated vendor password reaches the running front at its next ensure (what every reconcile
 * does), and a front whose proxy host was killed comes back, with its upstream, at the next
 * ensure. The vendor is a forward proxy of our own core with Basic auth.
 */
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { listenForwardProxy, type ForwardProxy } from '../../src/forward-proxy/server.ts';
import { silentLogger } from '../../src/logging.ts';
import type { Instance, InstanceSpec } from '../../src/providers/lifecycle.ts';
import { asIntent, instanceDir, INTENT_FILE, readJson } from '../../src/providers/local/instance-files.ts';
import { findHostProcesses } from '../../src/providers/local/process-table.ts';
import type { Provider } from '../../src/providers/types.ts';
import { createUpstreamProvider } from '../../src/providers/upstream/index.ts';
import { upstreamProviderSchema } from '../../src/providers/upstream/config.ts';
import { getThroughProxy } from '../support/proxy-get.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const sig = (): AbortSignal => AbortSignal.timeout(30_000);

describe('upstream fronts in the proxy host', { timeout: 60_000 }, () => {
  let vendorPassword = 'first-vendor-pw';
  let vendor: ForwardProxy;
  let origin: Server;
  let originPort = 0;
  let dir: string;
  let dataDir: string;
  let provider: Provider;

  beforeAll(async () => {
    dir = await tempDir('egress-upstream-lc-');
    dataDir = join(dir, 'data');
    vendor = await listenForwardProxy({
      host: '127.0.0.1',
      port: 0,
      admit: (c) => Promise.resolve(c?.username === 'v' && c.password === vendorPassword ? { allowed: true } : { allowed: false, status: 407, message: 'no' }),
      generation: () => 1,
      maxConnections: 64,
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 5_000,
    });
    origin = createServer((req, res) => res.end(`origin: ${req.url}`));
    origin.listen(0, '127.0.0.1');
    await once(origin, 'listening');
    originPort = (origin.address() as AddressInfo).port;
    await writeFile(join(dir, 'pw'), vendorPassword);
    provider = createUpstreamProvider(
      upstreamProviderSchema.parse({
        name: 'v',
        type: 'upstream',
        dataDir,
        endpoints: [{ name: 'e1', url: `http://v@127.0.0.1:${vendor.port}`, passwordFile: join(dir, 'pw') }],
        proxies: { egressPolicy: { allow: ['127.0.0.1/32'] } },
      }),
      { logger: silentLogger(), registry: new Registry(), dataDir: dir },
    );
  });
  afterAll(async () => {
    const lc = provider?.lifecycle;
    if (lc) {
      for await (const i of lc.listInstances('fleet', sig())) await lc.deleteInstance(i.name, undefined, { owner: i.owner, nameIsOurs: true }, sig());
    }
    await provider?.close();
    if (dataDir) await waitFor('the proxy host to stop', async () => (await findHostProcesses(dataDir)).length === 0, 30_000);
    await vendor?.close();
    await new Promise((resolve) => origin?.close(resolve));
  });

  const spec: InstanceSpec = { name: 'ep-v-e1-abc', owner: { fleet: 'fleet', proxy: 'v-e1' }, credentials: { username: 'crawler', password: 'ours-pw' } };

  test('a front forwards through its vendor; a rotated vendor password reaches it at the next ensure; its intent names the vendor without credentials', async () => {
    const lc = provider.lifecycle!;
    const made = await lc.ensureInstance(spec, sig());
    const port = made.endpoint!.port;
    expect(await getThroughProxy({ port: port, username: 'crawler', password: 'ours-pw' }, `http://127.0.0.1:${originPort}/one`)).toEqual({
      status: 200,
      body: 'origin: /one',
    });
    const intent = asIntent(await readJson(join(instanceDir(dataDir, spec.name), INTENT_FILE)));
    expect(intent?.upstream).toBe(`http://127.0.0.1:${vendor.port}`);
    expect(await readFile(join(instanceDir(dataDir, spec.name), INTENT_FILE), 'utf8')).not.toContain('first-vendor-pw');

    vendorPassword = 'second-vendor-pw';
    expect((await getThroughProxy({ port: port, username: 'crawler', password: 'ours-pw' }, `http://127.0.0.1:${originPort}/two`)).status).toBe(502);
    await writeFile(join(dir, 'pw'), vendorPassword);
    const again = await lc.ensureInstance(spec, sig());
    expect(again.endpoint).toEqual(made.endpoint);
    expect(await getThroughProxy({ port: port, username: 'crawler', password: 'ours-pw' }, `http://127.0.0.1:${originPort}/three`)).toEqual({
      status: 200,
      body: 'origin: /three',
    });
  });

  test('a proxy host killed under a front: the next ensure brings the front back with its upstream, on the same port', async () => {
    const lc = provider.lifecycle!;
    const before = await lc.ensureInstance(spec, sig());
    const [host] = await findHostProcesses(dataDir);
    expect(host).toBeDefined();
    process.kill(host!, 'SIGKILL');
    await waitFor('the old host gone', async () => !(await findHostProcesses(dataDir)).includes(host!), 10_000);
    let seen: Instance | undefined;
    await waitFor(
      'an ensure that brings the front back',
      async () => {
        seen = await lc.ensureInstance(spec, sig()).catch(() => undefined);
        return seen?.state === 'running';
      },
      30_000,
    );
    expect(seen?.endpoint).toEqual(before.endpoint);
    expect(await getThroughProxy({ port: before.endpoint!.port, username: 'crawler', password: 'ours-pw' }, `http://127.0.0.1:${originPort}/back`)).toEqual({
      status: 200,
      body: 'origin: /back',
    });
  });
});
