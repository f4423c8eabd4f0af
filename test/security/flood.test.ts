import { writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { freePort } from '../../src/redis/redis-server.ts';
import { spawnEgress, type EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { rawRequest } from '../support/raw-http.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

/**
 * A flood of idle sockets at `egress up` run with a low limit on open files (256, soft and hard,
 * so raising the soft limit cannot help): more idle connections than the process has descriptors,
 * from a client without a token. `/healthz` keeps answering, the probe loop keeps passing and no
 * proxy leaves discovery. Before the caps the sockets took every descriptor: health went
 * unanswered and the probes' own EMFILE evicted the proxy.
 */

const OPEN_FILES = 256;
const FLOOD = 600;
const TOKEN = 'flood-test-token-0123456789abcdef';

/** Opens `count` idle TCP connections from `localAddress`; resolves once each is connected or refused. */
async function openIdle(port: number, count: number, localAddress: string): Promise<Socket[]> {
  const sockets: Socket[] = [];
  await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve) => {
          const s = connect({ host: '127.0.0.1', port, localAddress });
          sockets.push(s);
          s.on('error', () => undefined);
          s.once('connect', () => resolve());
          s.once('close', () => resolve());
        }),
    ),
  );
  return sockets;
}

async function metric(apiUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${apiUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

describe('a flood of idle sockets past the open-files limit', () => {
  let up: EgressProcess;
  let apiUrl: string;
  let port: number;
  const auth = { authorization: `Bearer ${TOKEN}` };

  beforeAll(async () => {
    const dir = await tempDir('egress-flood-');
    const tokenFile = join(dir, 'tokens');
    await writeFile(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    port = await freePort();
    up = spawnEgress(
      [
        'up',
        '--port',
        String(port),
        '--api-token-file',
        tokenFile,
        '--data-dir',
        join(dir, 'data'),
        '--prefix',
        uniquePrefix(),
        '--probe-interval',
        '1s',
        '--probe-timeout',
        '500ms',
        '--provider-check-interval',
        '10s',
      ],
      { REDIS_URL: inject('redisUrl'), EGRESS_LOG_LEVEL: 'info' },
      undefined,
      OPEN_FILES,
    );
    await up.waitForLog('egress is up: API ', 60_000);
    apiUrl = `http://127.0.0.1:${port}`;
    const applied = await fetch(`${apiUrl}/v1/proxies`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/yaml' },
      body: 'metadata: { name: steady }\nspec: { provider: local }\n',
    });
    expect(applied.status).toBe(200);
    await waitFor(
      'the proxy to be Ready',
      async () => ((await (await fetch(`${apiUrl}/v1/proxies/steady`, { headers: auth })).json()) as { status: { phase: string } }).status.phase === 'Ready',
      60_000,
    );
  }, 90_000);

  afterAll(async () => {
    if (!up) return;
    await fetch(`${apiUrl}/v1/proxies/steady`, { method: 'DELETE', headers: auth }).catch(() => undefined);
    await waitFor('the proxy to be gone', async () => (await fetch(`${apiUrl}/v1/proxies/steady`, { headers: auth })).status === 404, 30_000).catch(
      () => undefined,
    );
    expect(await up.stop()).toBe(0);
  }, 60_000);

  test('/healthz answers, probes keep passing, and the proxy never leaves discovery', async () => {
    expect(up.logs()).toContain(`"openFiles":${OPEN_FILES}`);
    const ok = 'proxy_operator_readiness_probes_total{provider="local",result="ok"}';
    const failed = 'proxy_operator_readiness_probes_total{provider="local",result="failed"}';
    const passedBefore = await metric(apiUrl, ok);
    const failedBefore = await metric(apiUrl, failed);
    // From another address of this machine than the API's own clients (the proxies' echo, this test).
    const flood = await openIdle(port, FLOOD, '127.0.0.2');
    try {
      // Every look answers, not the odd lucky one: ten in a row, each on a new connection as a
      // kubelet's would be (no clock of the test's: a look that never answers fails at the test's timeout).
      for (let i = 0; i < 10; i++) {
        expect((await rawRequest(`${apiUrl}/healthz`, { headers: { connection: 'close' } })).status).toBe(200);
        expect((await rawRequest(`${apiUrl}/readyz`, { headers: { ...auth, connection: 'close' } })).status).toBe(200);
      }
      // The probe loop goes on passing through the flood: five more passes, none failed.
      await waitFor('five more passing probes', async () => (await metric(apiUrl, ok)) >= passedBefore + 5, 20_000);
      expect(await metric(apiUrl, failed)).toBe(failedBefore);
      expect(await metric(apiUrl, 'proxy_operator_proxy_evictions_total')).toBe(0);
      const proxy = (await (await fetch(`${apiUrl}/v1/proxies/steady`, { headers: auth })).json()) as { status: { phase: string } };
      expect(proxy.status.phase).toBe('Ready');
      // The caps, not luck: the API refused most of the flood's sockets at accept.
      expect(await metric(apiUrl, 'proxy_operator_http_connections_refused_total{listener="api",reason="over-capacity"}')).toBeGreaterThan(0);
    } finally {
      for (const s of flood) s.destroy();
    }
  }, 60_000);
});
