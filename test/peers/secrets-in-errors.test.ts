/**
 * Issue 28 §3: peers quote what they were sent. A Compute API and a kube-apiserver that refuse a write
 * with the request in their message (the fakes' `quoteRequest` switch: its Authorization header and its
 * body — the insert's user-data with the proxy's password, the Secret's base64 `data`), driving the real
 * roles (`runRoles`: worker + API, the secret registry built as the entry point builds it). Neither the
 * proxy's password nor the bearer token may reach the Proxy's status, its events, the log, the failed
 * job or an exported span.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { parseConfigDocument } from '../../src/config/file.ts';
import { createLogger } from '../../src/logging.ts';
import { closeRedis, createRedis, type RedisClient } from '../../src/redis/connections.ts';
import { SecretRegistry } from '../../src/secrets/secret-registry.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { telemetryFromEnv } from '../../src/telemetry/config.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { silentLogger } from '../../src/logging.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { testConfig } from '../support/config.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const GCP_TOKEN = 'gcp-bearer-token-4f1c9a';
const KUBE_TOKEN = 'kube-bearer-token-7d2e5b';

describe('secrets quoted in peers’ error text', () => {
  let roles: RunningRoles;
  let api: string;
  let compute: FakeCompute;
  let kube: FakeKubeApiserver;
  let receiver: OtlpReceiver;
  let redis: RedisClient;
  let prefix: string;
  const logLines: string[] = [];

  beforeAll(async () => {
    compute = await startFakeCompute({ project: 'egress-test', tokens: [GCP_TOKEN] });
    kube = await startFakeKubeApiserver({ tokens: { [KUBE_TOKEN]: 'system:serviceaccount:egress:operator' } });
    kube.store.namespaces.add('proxies');
    receiver = await startOtlpReceiver();
    const dir = await tempDir('egress-secrets-');
    await writeFile(join(dir, 'gcp-token'), `${GCP_TOKEN}\n`);
    await writeFile(join(dir, 'kube-token'), `${KUBE_TOKEN}\n`);
    const { providers } = parseConfigDocument(
      {
        providers: [
          {
            name: 'gce',
            type: 'gcp',
            project: 'egress-test',
            accessTokenFile: join(dir, 'gcp-token'),
            apiEndpoint: '127.0.0.1',
            port: compute.port,
            protocol: 'http',
            proxies: { image: 'projects/egress/global/images/family/forward-proxy' },
          },
          { name: 'k8s', type: 'kubernetes', server: kube.url, tokenFile: join(dir, 'kube-token'), skipTLSVerify: true, namespace: 'proxies', proxies: {} },
        ],
      },
      'test',
    );
    const base = testConfig({ providers, queues: ['reconcile'], lockDurationMs: 30_000 });
    prefix = base.redis.prefix;
    const config = { ...base, telemetry: telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }) };
    // As `egress <role>` does: one registry, given to the logger and to the roles.
    const secrets = new SecretRegistry();
    const logger = createLogger({ level: 'debug', secrets, destination: { write: (line: string) => void logLines.push(line) } });
    roles = await runRoles(config, ['worker', 'api'], logger, { secrets });
    api = roles.api?.url ?? '';
    redis = createRedis(base.redis.url ?? '', 'producer', silentLogger());
  });
  afterAll(async () => {
    await roles?.close();
    if (redis) await closeRedis(redis);
    await compute?.close();
    await kube?.close();
    await receiver?.close();
  });

  const apply = (yaml: string) => fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: yaml });
  const proxy = async (name: string) => (await (await fetch(`${api}/v1/proxies/${name}`)).json()) as ProxyView;
  const failed = (name: string) =>
    waitFor(`${name} to fail`, async () => {
      const p = await proxy(name);
      return p.status.phase === 'Failed' ? p : undefined;
    });
  const password = async (name: string): Promise<string> => {
    const creds = await new RedisProxyStore(redis, prefix).credentials(name);
    if (!creds) throw new Error(`no credentials for ${name}`);
    return creds.password;
  };
  const events = async (name: string) => JSON.stringify(await (await fetch(`${api}/v1/events?proxy=${name}`)).json());
  const spans = async (): Promise<string> => {
    await roles.tracing.flush();
    return receiver.requests.map((r) => r.body.toString('utf8')).join('\n');
  };

  /** Every place the test can read: each must hold none of `secrets`, and the peer must have quoted them. */
  async function expectNowhere(name: string, peerSaw: string, secrets: readonly string[], extra: Readonly<Record<string, string>> = {}): Promise<void> {
    for (const s of secrets) expect(peerSaw, 'the peer quoted it (the test can fail)').toContain(s);
    const places = { status: JSON.stringify((await proxy(name)).status), events: await events(name), logs: logLines.join(''), spans: await spans(), ...extra };
    for (const [where, text] of Object.entries(places)) for (const s of secrets) expect(text, `${where} holds a secret`).not.toContain(s);
  }

  test('a Compute 400 quoting the insert: Failed, the message redacted in status, event, logs and spans', async () => {
    compute.misbehaviour = { quoteRequest: { path: '/instances', status: 400, reason: 'invalid' } };
    try {
      expect((await apply('metadata: { name: gce-400 }\nspec: { provider: gce }\n')).status).toBe(200);
      const p = await failed('gce-400');
      expect(p.status.lastError).toMatch(/HTTP 400 invalid: invalid request \(Authorization: Bearer \[redacted\]\)/);
      expect(p.status.lastError).toContain('[redacted]');
      expect(await events('gce-400')).toContain('Failed');
      const quoted = compute.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/instances'));
      expect(quoted).toHaveLength(1);
      await expectNowhere('gce-400', `${quoted[0]?.authorization} ${quoted[0]?.body}`, [await password('gce-400'), GCP_TOKEN]);
    } finally {
      compute.misbehaviour = {};
    }
  });

  test('a Compute 403 quoting the insert fails the job at once: its failedReason and stacktrace redacted', async () => {
    compute.misbehaviour = { quoteRequest: { path: '/instances', status: 403, reason: 'forbidden' } };
    const queue = new Queue('reconcile', { connection: redisOptions(inject('redisUrl'), 'producer'), prefix });
    try {
      expect((await apply('metadata: { name: gce-403 }\nspec: { provider: gce }\n')).status).toBe(200);
      const job = await waitFor('the failed reconcile job', async () => (await queue.getFailed()).find((j) => j.data.proxy === 'gce-403'));
      expect(job.failedReason).toMatch(/HTTP 403 forbidden/);
      const quoted = compute.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/instances') && r.body.includes('gce-403'));
      const jobText = JSON.stringify({ reason: job.failedReason, stack: job.stacktrace, value: job.returnvalue });
      await expectNowhere('gce-403', `${quoted[0]?.authorization} ${quoted[0]?.body}`, [await password('gce-403'), GCP_TOKEN], { job: jobText });
      // The sinks did see the quoted text, redacted: the job, its process span's exception, the failure log line.
      expect(jobText).toContain('Bearer [redacted]');
      expect(await spans()).toContain('Bearer [redacted]');
      expect(logLines.join('')).toContain('Bearer [redacted]');
    } finally {
      compute.misbehaviour = {};
      await queue.close();
    }
  });

  test('a kube-apiserver 422 quoting the Secret it was sent (base64 data): Failed, nothing of the password anywhere', async () => {
    kube.misbehaviour = { quoteRequest: { path: '/secrets', status: 422, reason: 'Invalid' } };
    try {
      expect((await apply('metadata: { name: k8s-422 }\nspec: { provider: k8s }\n')).status).toBe(200);
      const p = await failed('k8s-422');
      expect(p.status.lastError).toContain('[redacted]');
      const quoted = kube.requests.filter((r) => r.method !== 'GET' && r.path.includes('/secrets'));
      const pw = await password('k8s-422');
      const seen = `${quoted.map((r) => `${r.authorization} ${r.body}`).join('\n')}`;
      // The Secret carries the password base64-encoded (data), as the server quoted it.
      await expectNowhere('k8s-422', seen, [Buffer.from(pw).toString('base64'), KUBE_TOKEN]);
      const all = JSON.stringify((await proxy('k8s-422')).status) + (await events('k8s-422')) + logLines.join('');
      expect(all).not.toContain(pw);
    } finally {
      kube.misbehaviour = {};
    }
  });
});
