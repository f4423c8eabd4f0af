import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OAuth2Client } from 'google-auth-library';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { silentLogger } from '../../src/logging.ts';
import {
  computeClientOptions,
  createComputeClients,
  createGcpProvider,
  gcpProviderSchema,
  MANAGED_FILTER,
  MANAGED_LABELS,
} from '../../src/providers/gcp/index.ts';
import { runCheck } from '../../src/checks/run-check.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/types.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';

const deps = () => ({ logger: silentLogger(), registry: new Registry(), dataDir: '/nonexistent' });

let compute: FakeCompute;
let dir: string;
const providers: Provider[] = [];

beforeEach(async () => {
  compute = await startFakeCompute({ project: 'egress-test', tokens: ['good-token'] });
  dir = await mkdtemp(join(tmpdir(), 'egress-gcp-'));
});

afterEach(async () => {
  for (const p of providers.splice(0)) await p.close();
  await compute.close();
  await rm(dir, { recursive: true, force: true });
});

/** A provider built the production way from a parsed config with an access-token file. */
async function provider(overrides: { project?: string; token?: string; port?: number } = {}): Promise<Provider> {
  const accessTokenFile = join(dir, `token-${providers.length}`);
  await writeFile(accessTokenFile, `${overrides.token ?? 'good-token'}\n`);
  const config = gcpProviderSchema.parse({
    name: 'gce',
    type: 'gcp',
    project: overrides.project ?? 'egress-test',
    accessTokenFile,
    apiEndpoint: '127.0.0.1',
    port: overrides.port ?? compute.port,
    protocol: 'http',
  });
  const p = createGcpProvider(config, deps());
  providers.push(p);
  return p;
}

const endpoint = () => `127.0.0.1:${compute.port}`;
const EXPECTED_QUERY = 'filter=labels.managed-by%20%3D%20%22egress-proxies%22&maxResults=1&returnPartialSuccess=true';

describe('gcp health check', () => {
  it('reports Ok after exactly one request with maxResults=1 and the managed filter, on a project with many pages', async () => {
    const zones = ['europe-west1-b', 'us-central1-a', 'us-central1-b'];
    for (let i = 0; i < 12; i++) compute.seedInstance(zones[i % 3]!, { name: `proxy-${i}`, labels: { ...MANAGED_LABELS } });
    compute.seedInstance('us-central1-a', { name: 'unrelated', labels: { team: 'web' } });

    const [r, ...rest] = await (await provider()).check(new AbortController().signal);

    expect(rest).toEqual([]);
    expect(r).toMatchObject({ target: 'compute', ready: true, reason: 'Ok', details: { project: 'egress-test', endpoint: endpoint() } });
    expect(r!.message).toContain('at least one managed instance');
    expect(compute.requests).toHaveLength(1);
    const req = compute.requests[0]!;
    expect(req.method).toBe('GET');
    expect(req.path).toBe('/compute/v1/projects/egress-test/aggregated/instances');
    expect(req.query).toEqual({ filter: MANAGED_FILTER, maxResults: '1', returnPartialSuccess: 'true' });
    // Wire contract: compute 6.15 sends no `$alt=json;enum-encoding=int` (numericEnums is off in the client).
    expect(req.rawQuery).toBe(EXPECTED_QUERY);
    expect(req.authorization).toBe('Bearer good-token');
    expect(req.requestParams).toBe('project=egress-test');
    expect(req.apiClient).toMatch(/^gax\/5\.\S+ gapic\/6\.15\.\d+ gl-node\/20\./);
    expect(req.status).toBe(200);
    expect(JSON.parse(req.responseBody!).nextPageToken).toBeTruthy();
  });

  it('is built by the provider factory from parsed configuration and reports through runCheck', async () => {
    const accessTokenFile = join(dir, 'factory-token');
    await writeFile(accessTokenFile, 'good-token');
    const config = gcpProviderSchema.parse({ name: 'gce', type: 'gcp', project: 'egress-test', accessTokenFile, ...compute.clientOptions() });
    const p = await createProvider(config, deps());
    providers.push(p);
    expect(p).toMatchObject({ name: 'gce', type: 'gcp' });
    expect(await runCheck(p, new AbortController().signal)).toMatchObject([{ target: 'compute', ready: true, reason: 'Ok' }]);
  });

  it('reports Ok after one request on an empty project', async () => {
    const [r] = await (await provider()).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: true, reason: 'Ok' });
    expect(r!.message).toContain('no managed instances');
    expect(compute.requests.map((q) => q.rawQuery)).toEqual([EXPECTED_QUERY]);
  });

  it('creates its clients once and keeps using them', async () => {
    const p = await provider();
    await p.check(new AbortController().signal);
    const [r] = await p.check(new AbortController().signal);
    expect(r!.reason).toBe('Ok');
    expect(compute.requests).toHaveLength(2);
  });

  it('reports Forbidden from a real 403 for a project the credentials may not list', async () => {
    const [r] = await (await provider({ project: 'someone-else' })).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Forbidden', details: { project: 'someone-else' } });
    expect(r!.message).toBe("HTTP 403 forbidden: Required 'compute.instances.list' permission for 'projects/someone-else'");
  });

  it('reports Forbidden when the Compute API is disabled', async () => {
    compute.disableApi();
    const [r] = await (await provider()).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Forbidden' });
    expect(r!.message).toMatch(/^HTTP 403 accessNotConfigured: Compute Engine API has not been used in project/);
  });

  it('reports Unauthorized from a real 401 for a token the API rejects, without retrying', async () => {
    const [r] = await (await provider({ token: 'expired-token' })).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Unauthorized' });
    expect(r!.message).toMatch(/^HTTP 401 authError: Request had invalid authentication credentials/);
    expect(compute.requests).toHaveLength(1);
  });

  it('reports Error for 503 and 429, sending one request each (the client does not retry)', async () => {
    const p = await provider();
    compute.injectFault({ status: 503 });
    const [r503] = await p.check(new AbortController().signal);
    expect(r503).toMatchObject({ ready: false, reason: 'Error', message: 'HTTP 503 backendError: fault injected: 503' });
    compute.injectFault({ status: 429, message: 'Rate Limit Exceeded' });
    const [r429] = await p.check(new AbortController().signal);
    expect(r429).toMatchObject({ reason: 'Error', message: 'HTTP 429 rateLimitExceeded: Rate Limit Exceeded' });
    expect(compute.requests.map((q) => q.status)).toEqual([503, 429]);
  });

  it('reports Unreachable for a closed port', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const [r] = await (await provider({ port })).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Unreachable', details: { endpoint: `127.0.0.1:${port}` } });
    expect(r!.message).toMatch(/^ECONNREFUSED: /);
  });

  it('reports Unreachable for a server certificate it cannot verify', async () => {
    const tls = await startFakeCompute({ tls: true, tokens: ['good-token'] });
    try {
      const accessTokenFile = join(dir, 'tls-token');
      await writeFile(accessTokenFile, 'good-token');
      const config = gcpProviderSchema.parse({ name: 'gce', type: 'gcp', project: 'egress-test', accessTokenFile, ...tls.clientOptions() });
      const p = createGcpProvider(config, deps());
      providers.push(p);
      const [r] = await p.check(new AbortController().signal);
      expect(r).toMatchObject({ ready: false, reason: 'Unreachable' });
      expect(r!.message).toMatch(/^DEPTH_ZERO_SELF_SIGNED_CERT: /);
      expect(tls.requests).toEqual([]);
    } finally {
      await tls.close();
    }
  });

  it('reports Unreachable when the server drops the connection', async () => {
    compute.injectFault({ destroySocket: true });
    const [r] = await (await provider()).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Unreachable' });
  });

  it('reports Timeout once the signal ends, and really aborts the HTTP request', async () => {
    compute.injectFault({ latencyMs: 120_000 });
    const p = await provider();
    const ac = new AbortController();
    const received = compute.nextRequest();
    const aborted = compute.nextClientAbort();

    const checking = p.check(ac.signal);
    await received;
    ac.abort();
    const [r] = await checking;

    expect(r).toMatchObject({ ready: false, reason: 'Timeout', details: { project: 'egress-test', endpoint: endpoint() } });
    expect((await aborted).outcome).toBe('client-aborted');
    expect(compute.requests).toHaveLength(1);
  });

  it('reports Timeout when the signal ends while credentials are still being fetched', async () => {
    let authStarted!: () => void;
    const inAuth = new Promise<void>((resolve) => (authStarted = resolve));
    const auth = new OAuth2Client();
    // Stands in for a slow credential source (an ADC metadata-server probe): it never answers.
    auth.refreshHandler = () => {
      authStarted();
      return new Promise(() => undefined);
    };
    const config = gcpProviderSchema.parse({
      name: 'gce',
      type: 'gcp',
      project: 'egress-test',
      apiEndpoint: '127.0.0.1',
      port: compute.port,
      protocol: 'http',
    });
    const p = createGcpProvider(config, deps(), { clients: createComputeClients({ ...compute.clientOptions(), authClient: auth }) });
    providers.push(p);
    const ac = new AbortController();
    const checking = p.check(ac.signal);
    await inAuth;
    ac.abort();
    expect((await checking)[0]).toMatchObject({ ready: false, reason: 'Timeout' });
    expect(compute.requests).toEqual([]);
  });

  it('builds Compute clients that share the endpoint and the token-file credentials', async () => {
    compute.seedInstance('us-central1-a', { name: 'doomed' });
    const accessTokenFile = join(dir, 'shared-token');
    await writeFile(accessTokenFile, ' good-token \n');
    const clients = createComputeClients(computeClientOptions({ accessTokenFile, apiEndpoint: '127.0.0.1', port: compute.port, protocol: 'http' }));
    try {
      const [lro] = await clients.instances.delete({ project: 'egress-test', zone: 'us-central1-a', instance: 'doomed' });
      const [op] = await clients.zoneOperations.wait({ project: 'egress-test', zone: 'us-central1-a', operation: lro.latestResponse.name });
      expect(op.status).toBe('DONE');
      expect(compute.getInstance('us-central1-a', 'doomed')).toBeUndefined();
      expect(compute.requests.map((r) => r.authorization)).toEqual(['Bearer good-token', 'Bearer good-token']);
    } finally {
      await clients.close();
    }
  });

  it('rejects unreadable credential files at creation, naming the field', () => {
    expect(() => computeClientOptions({ accessTokenFile: join(dir, 'absent') }, 'providers[2]')).toThrow(ConfigError);
    expect(() => computeClientOptions({ credentialsFile: join(dir, 'absent') }, 'providers[2]')).toThrow(/providers\[2\]\.credentialsFile: cannot read/);
  });
});
