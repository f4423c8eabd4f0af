import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';

const TOKEN = 'test-token-0123456789abcdef';

describe('API authentication', () => {
  let roles: RunningRoles;
  let api: string;

  beforeAll(async () => {
    roles = await runRoles(testConfig({ tokens: [TOKEN, 'second-token-0123456789'] }), ['api'], silentLogger());
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles.close();
  });

  test('a non-loopback bind without tokens refuses to start', async () => {
    const run = await runCli(['api', '--host', '0.0.0.0'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(run).toMatchObject({ code: 2, err: 'error: --host: binding 0.0.0.0 (not loopback) requires --api-token-file\n' });
    const dir = await tempDir('egress-tokens-');
    const empty = join(dir, 'tokens');
    await writeFile(empty, '# no tokens yet\n', { mode: 0o600 });
    const emptyRun = await runCli(['api', '--host', '0.0.0.0', '--api-token-file', empty], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(emptyRun).toMatchObject({ code: 2, err: `error: --api-token-file: ${empty} holds no token (one token a line)\n` });
  });

  test.each(['/v1/providerhealths', '/v1/jobs', '/metrics', '/readyz', '/admin/queues', '/admin/queues/api/queues'])('%s needs a valid token', async (path) => {
    const missing = await fetch(api + path);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toEqual({ error: 'Unauthorized', message: 'a bearer token is required' });
    const wrong = await fetch(api + path, { headers: { authorization: 'Bearer not-the-token' } });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ error: 'Unauthorized', message: 'the token is not valid' });
    const right = await fetch(api + path, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(right.status).toBe(200);
    const second = await fetch(api + path, { headers: { authorization: 'Bearer second-token-0123456789' } });
    expect(second.status).toBe(200);
  });

  test('POST routes need a token too', async () => {
    expect((await fetch(`${api}/v1/providers/local/checks`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${api}/v1/jobs/retry-failed`, { method: 'POST' })).status).toBe(401);
    const ok = await fetch(`${api}/v1/providers/local/checks`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(202);
  });

  test('Bearer parsing is strict: trailing words, a missing space or another scheme are refused', async () => {
    for (const header of [`Bearer ${TOKEN} trailing`, `Bearer  ${TOKEN} x`, `Bearer${TOKEN}`, `Token ${TOKEN}`]) {
      const res = await fetch(`${api}/v1/providerhealths`, { headers: { authorization: header } });
      expect(res.status, header).toBe(401);
    }
    expect((await fetch(`${api}/v1/providerhealths`, { headers: { authorization: `bearer ${TOKEN}` } })).status).toBe(200);
  });

  test('Basic with the token as password is accepted only under /admin/ (a browser), not on /v1 or /metrics', async () => {
    const basic = `Basic ${Buffer.from(`anyone:${TOKEN}`).toString('base64')}`;
    for (const path of ['/v1/providerhealths', '/v1/jobs', '/metrics', '/readyz']) {
      const res = await fetch(api + path, { headers: { authorization: basic } });
      expect(res.status, path).toBe(401);
      expect(await res.json()).toEqual({ error: 'Unauthorized', message: 'the Authorization header is not "Bearer <token>"' });
    }
    expect((await fetch(`${api}/admin/queues/api/queues`, { headers: { authorization: basic } })).status).toBe(200);
  });

  test('/healthz is open', async () => {
    const res = await fetch(`${api}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('ok');
  });

  test('a browser gets a Basic challenge for Bull Board and may answer with the token as password', async () => {
    const challenge = await fetch(`${api}/admin/queues`);
    expect(challenge.headers.get('www-authenticate')).toMatch(/^Basic realm="egress"/);
    const basic = Buffer.from(`anyone:${TOKEN}`).toString('base64');
    const page = await fetch(`${api}/admin/queues`, { headers: { authorization: `Basic ${basic}` } });
    expect(page.status).toBe(200);
  });

  test('Bull Board’s page, assets and API load behind the token', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const page = await fetch(`${api}/admin/queues`, { headers: auth });
    const html = await page.text();
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    const assets = [...html.matchAll(/(?:src|href)="([^"]+\.(?:js|css))"/g)].map((m) => m[1] ?? '');
    expect(assets.length).toBeGreaterThan(0);
    for (const asset of assets) {
      const url = new URL(asset, `${api}/admin/queues/`);
      const res = await fetch(url, { headers: auth });
      expect(res.status, url.pathname).toBe(200);
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(100);
      expect((await fetch(url)).status).toBe(401);
    }
    const queues = (await (await fetch(`${api}/admin/queues/api/queues`, { headers: auth })).json()) as { queues: { name: string }[] };
    expect(queues.queues.map((q) => q.name).sort()).toEqual(['checks', 'gc', 'reconcile', 'results']);
  });

  test('the CLI sends the token from a file or the environment', async () => {
    const dir = await tempDir('egress-cli-token-');
    const file = join(dir, 'token');
    await writeFile(file, `${TOKEN}\n`, { mode: 0o600 });
    expect((await runCli(['get', 'ph', '--api-url', api, '--token-file', file])).code).toBe(0);
    expect((await runCli(['get', 'ph', '--api-url', api], { EGRESS_API_TOKEN: TOKEN })).code).toBe(0);
    const denied = await runCli(['get', 'ph', '--api-url', api]);
    expect(denied.code).toBe(1);
    expect(denied.err).toMatch(
      /^error: a bearer token is required \(no token was sent: run the CLI in the directory of `egress up`.*--data-dir, --token-file or EGRESS_API_TOKEN\) \(ERR_API\)\n$/,
    );
  });
});
