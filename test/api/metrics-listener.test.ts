import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig } from '../../src/config/app.ts';
import { createLogger } from '../../src/logging.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { rawRequest } from '../support/raw-http.ts';
import { waitFor } from '../support/wait.ts';

const TOKEN = 'metrics-token-0123456789abcdef';
const DEAD_REDIS = { REDIS_URL: 'redis://127.0.0.1:1' };

/** Runs `roles` with a metrics listener and returns its URL (from the "metrics listening" log line). */
async function withMetrics(tokens: string[]): Promise<{ roles: RunningRoles; url: string }> {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const config = freezeConfig({ ...testConfig({ tokens }), metricsPort: 0 });
  const roles = await runRoles(config, ['publisher'], createLogger({ level: 'info', destination }));
  const line = await waitFor('the metrics listener', () => lines.find((l) => l.includes('metrics listening')));
  return { roles, url: (JSON.parse(line) as { url: string }).url.replace(/\/metrics$/, '') };
}

describe('the --metrics-port listener of a separate role', () => {
  let dir: string;
  let tokenFile: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'egress-metrics-'));
    tokenFile = join(dir, 'tokens');
    await writeFile(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test.each(['worker', 'scheduler', 'publisher'])('egress %s refuses to bind it off loopback without --api-token-file, and accepts the flag', async (role) => {
    const run = await runCli([role, '--metrics-port', '9464', '--host', '0.0.0.0'], DEAD_REDIS);
    expect(run).toMatchObject({ code: 2, err: 'error: --host: binding the --metrics-port listener on 0.0.0.0 (not loopback) requires --api-token-file\n' });
    const ok = await runCli([role, '--metrics-port', '9464', '--host', '0.0.0.0', '--api-token-file', tokenFile, '--check-config'], DEAD_REDIS);
    expect(ok).toMatchObject({ code: 0 });
  });

  test('with tokens, /metrics needs a bearer token like the API; /healthz stays open', async () => {
    const { roles, url } = await withMetrics([TOKEN]);
    try {
      const missing = await rawRequest(`${url}/metrics`);
      expect(missing.status).toBe(401);
      expect(missing.json()).toEqual({ error: 'Unauthorized', message: 'a bearer token is required' });
      expect((await rawRequest(`${url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
      expect((await rawRequest(`${url}/metrics`, { headers: { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` } })).status).toBe(401);
      const ok = await rawRequest(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}`, host: 'worker-1:9464' } });
      expect(ok.status).toBe(200);
      expect(ok.text).toContain('proxy_operator_');
      expect((await rawRequest(`${url}/healthz`)).status).toBe(200);
    } finally {
      await roles.close();
    }
  });

  test('without tokens (loopback) it refuses a foreign Host, as the API does', async () => {
    const { roles, url } = await withMetrics([]);
    try {
      expect((await rawRequest(`${url}/metrics`)).status).toBe(200);
      expect((await rawRequest(`${url}/metrics`, { headers: { host: `rebind.evil.example:${new URL(url).port}` } })).status).toBe(403);
    } finally {
      await roles.close();
    }
  });
});
