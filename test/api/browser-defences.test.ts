import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { rawRequest } from '../support/raw-http.ts';

const doc = (name: string) => `apiVersion: egress-proxies/v1\nkind: Proxy\nmetadata:\n  name: ${name}\nspec:\n  provider: local\n`;
const TOKEN = 'browser-test-token-0123456789';

async function proxyNames(api: string): Promise<string[]> {
  const res = await rawRequest(`${api}/v1/proxies`);
  return res.json<{ items: { name: string }[] }>().items.map((p) => p.name);
}

describe('cross-site requests and DNS rebinding, API without tokens (loopback)', () => {
  let roles: RunningRoles;
  let api: string;
  let port: string;

  beforeAll(async () => {
    roles = await runRoles(testConfig({ allowedHosts: ['egress.test', 'pinned.test:1234'] }), ['api'], silentLogger());
    api = roles.api?.url ?? '';
    port = new URL(api).port;
  });
  afterAll(async () => {
    await roles.close();
  });

  test.each([
    ['text/plain', 'text/plain;charset=UTF-8'],
    ['a form', 'application/x-www-form-urlencoded'],
    ['multipart', 'multipart/form-data; boundary=x'],
  ])('a POST of %s is refused 415 and creates nothing', async (_what, type) => {
    const res = await rawRequest(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': type }, body: doc('csrf') });
    expect(res.status).toBe(415);
    expect(res.json()).toEqual({
      error: 'ERR_UNSUPPORTED_MEDIA_TYPE',
      message: expect.stringMatching(
        /^Content-Type ".*" is not accepted for POST: send application\/json, application\/yaml, application\/x-yaml, text\/yaml$/,
      ) as unknown,
    });
    expect(await proxyNames(api)).not.toContain('csrf');
  });

  test('a POST with a foreign Origin is refused 403 even with a JSON body; the API’s own Origin passes', async () => {
    const body = JSON.stringify({ apiVersion: 'egress-proxies/v1', kind: 'Proxy', metadata: { name: 'cross' }, spec: { provider: 'local' } });
    for (const origin of ['https://evil.example', 'null', `http://evil.example:${port}`]) {
      const res = await rawRequest(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/json', origin }, body });
      expect(res.status, origin).toBe(403);
      expect(res.json<{ error: string }>().error).toBe('ERR_CROSS_ORIGIN');
    }
    expect(await proxyNames(api)).not.toContain('cross');
    const own = await rawRequest(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/json', origin: api }, body });
    expect(own.status).toBe(200);
    expect(await proxyNames(api)).toContain('cross');
  });

  test('a bodyless POST from a foreign page (no-cors fetch: no Content-Type, but an Origin) is refused', async () => {
    const res = await rawRequest(`${api}/v1/jobs/retry-failed`, { method: 'POST', headers: { origin: 'https://evil.example' } });
    expect(res.status).toBe(403);
    expect((await rawRequest(`${api}/v1/jobs/retry-failed`, { method: 'POST' })).status).toBe(200);
  });

  test('a rebinding page (any other Host) is refused on every route, reads included', async () => {
    for (const path of [
      '/v1/proxies',
      '/v1/providerhealths',
      '/metrics',
      '/readyz',
      '/healthz',
      '/admin/queues',
      '/admin/queues/api/queues',
      '/v1/echo',
      '/v1/pools/web/pick',
    ]) {
      const res = await rawRequest(api + path, { headers: { host: `rebind.evil.example:${port}` } });
      expect(res.status, path).toBe(403);
      expect(res.json()).toEqual({ error: 'ERR_HOST_NOT_ALLOWED', message: expect.stringContaining('Host "rebind.evil.example:') as unknown });
    }
    for (const host of [`127.0.0.2:${port}`, `127.0.0.1:${Number(port) + 1}`, 'pinned.test:4321', `localhost.evil.example:${port}`]) {
      expect((await rawRequest(`${api}/v1/proxies`, { headers: { host } })).status, host).toBe(403);
    }
    for (const host of ['a b', `127.0.0.1@evil.example:${port}`]) {
      const status = (await rawRequest(`${api}/v1/proxies`, { headers: { host } })).status;
      expect(status >= 400 && status < 500, `${host}: ${status}`).toBe(true);
    }
  });

  test('the bound address with its port, localhost and --allowed-host names are served', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'localhost', `LOCALHOST:${port}`, 'egress.test', `egress.test:${port}`, 'pinned.test:1234']) {
      expect((await rawRequest(`${api}/v1/proxies`, { headers: { host } })).status, host).toBe(200);
    }
  });

  test('the readiness echo answers the Host a probe sends through a proxy (the echo URL’s)', async () => {
    const res = await rawRequest(`${api}/v1/echo`, { headers: { host: `127.0.0.1:${port}` } });
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ address: '127.0.0.1' });
  });

  test('Bull Board: its bodyless PUT from its own page works, a foreign Origin is refused', async () => {
    const foreign = await rawRequest(`${api}/admin/queues/api/queues/checks/retry/failed`, { method: 'PUT', headers: { origin: 'https://evil.example' } });
    expect(foreign.status).toBe(403);
    const own = await rawRequest(`${api}/admin/queues/api/queues/checks/retry/failed`, { method: 'PUT', headers: { origin: api } });
    expect(own.status).toBe(200);
    const form = await rawRequest(`${api}/admin/queues/api/queues/checks/retry/failed`, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: 'x',
    });
    expect(form.status).toBe(415);
  });

  test.each([
    '/admin/queues/api/queues?status=%00',
    '/admin/queues/api/queues?activeQueue=%ZZ',
    '/admin/queues/api/job-schedulers?queueName=%ZZ',
    '/admin/queues/api/queues?status=bogus&activeQueue=checks',
  ])('Bull Board answers %s with 400, not 500', async (path) => {
    const res = await rawRequest(api + path);
    expect(res.status).toBe(400);
  });

  test('the CLI’s requests still pass: apply (YAML), delete, check, jobs retry', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'egress-browser-'));
    try {
      const file = join(dir, 'p.yaml');
      await writeFile(file, doc('from-cli'));
      expect(await runCli(['apply', '-f', file, '--api-url', api])).toMatchObject({ code: 0 });
      expect(await runCli(['check', 'local', '--api-url', api])).toMatchObject({ code: 0 });
      expect(await runCli(['jobs', 'retry', '--all-failed', '--api-url', api])).toMatchObject({ code: 0 });
      expect(await runCli(['delete', 'proxy', 'from-cli', '--api-url', api])).toMatchObject({ code: 0 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('--allowed-host is validated and names itself', async () => {
    const run = await runCli(['api', '--allowed-host', 'http://x/'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(run).toMatchObject({
      code: 2,
      err: 'error: --allowed-host: expected a host name or address with an optional port (egress.local, egress.local:8080), got "http://x/"\n',
    });
    expect(
      (await runCli(['api', '--allowed-host', 'a.test', '--allowed-host', 'b.test:80', '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' })).code,
    ).toBe(0);
  });
});

describe('an --echo-url naming another host', () => {
  test('its host:port is served, so readiness probes through proxies keep working', async () => {
    const base = testConfig();
    const roles = await runRoles(freezeConfig({ ...base, echoUrl: 'http://host.docker.internal:18080/v1/echo' }), ['api'], silentLogger());
    try {
      const api = roles.api?.url ?? '';
      expect((await rawRequest(`${api}/v1/echo`, { headers: { host: 'host.docker.internal:18080' } })).status).toBe(200);
      expect((await rawRequest(`${api}/v1/echo`, { headers: { host: 'host.docker.internal:18081' } })).status).toBe(403);
    } finally {
      await roles.close();
    }
  });
});

describe('with tokens the token is the defence', () => {
  let roles: RunningRoles;
  let api: string;

  beforeAll(async () => {
    roles = await runRoles(testConfig({ tokens: [TOKEN] }), ['api'], silentLogger());
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles.close();
  });

  test('service names (compose, Kubernetes, an ingress) keep working', async () => {
    for (const host of ['api:8080', 'egress-api.egress.svc.cluster.local', 'egress.example.com']) {
      const res = await rawRequest(`${api}/v1/proxies`, { headers: { host, authorization: `Bearer ${TOKEN}` } });
      expect(res.status, host).toBe(200);
    }
  });

  test('Bull Board with Basic credentials a browser caches: a foreign Origin still cannot mutate', async () => {
    const basic = `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}`;
    const foreign = await rawRequest(`${api}/admin/queues/api/queues/checks/retry/failed`, {
      method: 'PUT',
      headers: { authorization: basic, origin: 'https://evil.example' },
    });
    expect(foreign.status).toBe(403);
    const own = await rawRequest(`${api}/admin/queues/api/queues/checks/retry/failed`, { method: 'PUT', headers: { authorization: basic, origin: api } });
    expect(own.status).toBe(200);
  });
});
