import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { silentLogger } from '../../src/logging.ts';
import {
  buildKubeConfig,
  createKubernetesProvider,
  kubernetesProviderSchema,
  MANAGED_LABEL_SELECTOR,
  MANAGED_LABELS,
} from '../../src/providers/kubernetes/index.ts';
import { runCheck } from '../../src/checks/run-check.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/types.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';

const deps = () => ({ logger: silentLogger(), registry: new Registry(), dataDir: '/nonexistent' });

let kube: FakeKubeApiserver;
let dir: string;
const providers: Provider[] = [];

beforeEach(async () => {
  kube = await startFakeKubeApiserver({ tokens: { 'good-token': 'system:serviceaccount:egress:operator', 'other-token': 'jane' } });
  dir = await mkdtemp(join(tmpdir(), 'egress-kube-'));
});

afterEach(async () => {
  for (const p of providers.splice(0)) await p.close();
  await kube.close();
  await rm(dir, { recursive: true, force: true });
});

/** A provider built the production way: `server` + `tokenFile` from a parsed config. */
async function providerFor(server: string, token: string, tls: { skipTLSVerify?: boolean; caFile?: string } = {}): Promise<Provider> {
  const tokenFile = join(dir, `token-${providers.length}`);
  await writeFile(tokenFile, `${token}\n`);
  const config = kubernetesProviderSchema.parse({ name: 'k8s', type: 'kubernetes', server, tokenFile, skipTLSVerify: true, ...tls });
  const p = createKubernetesProvider(config, deps());
  providers.push(p);
  return p;
}

const host = () => new URL(kube.url).host;

describe('kubernetes health check', () => {
  it('reports Ok with the API host after exactly one list call with limit=1 and the managed selector', async () => {
    kube.seedPod({ metadata: { name: 'proxy-a', namespace: 'proxies', labels: { ...MANAGED_LABELS } } });
    kube.seedPod({ metadata: { name: 'proxy-b', namespace: 'default', labels: { ...MANAGED_LABELS } } });
    const p = await providerFor(kube.url, 'good-token');

    const [r, ...rest] = await p.check(new AbortController().signal);

    expect(rest).toEqual([]);
    expect(r).toMatchObject({ target: 'apiserver', ready: true, reason: 'Ok', details: { host: host() } });
    expect(Object.keys(r!.details)).toEqual(['host']);
    expect(r!.message).toContain('at least one managed Pod');
    expect(r!.durationSeconds).toBeGreaterThanOrEqual(0);
    expect(kube.requests).toHaveLength(1);
    const req = kube.requests[0]!;
    expect(req.method).toBe('GET');
    expect(req.path).toBe('/api/v1/pods');
    expect(req.query).toEqual({ labelSelector: MANAGED_LABEL_SELECTOR, limit: '1' });
    expect(req.rawQuery).toBe('labelSelector=app%3Degress-proxy%2Cmanaged-by%3Degress-proxies&limit=1');
    expect(req.authorization).toBe('Bearer good-token');
    expect(req.accept).toBe('application/json, */*;q=0.8');
    expect(req.status).toBe(200);
  });

  it('is built by the provider factory from parsed configuration and reports through runCheck', async () => {
    const tokenFile = join(dir, 'factory-token');
    await writeFile(tokenFile, 'good-token');
    const config = kubernetesProviderSchema.parse({ name: 'k8s', type: 'kubernetes', server: kube.url, tokenFile, skipTLSVerify: true });
    const p = await createProvider(config, deps());
    providers.push(p);
    expect(p).toMatchObject({ name: 'k8s', type: 'kubernetes' });
    expect(await runCheck(p, new AbortController().signal)).toMatchObject([{ target: 'apiserver', ready: true, reason: 'Ok' }]);
  });

  it('reports Ok on a cluster without managed Pods', async () => {
    kube.seedPod({ metadata: { name: 'unrelated', labels: { app: 'other' } } });
    const [r] = await (await providerFor(kube.url, 'good-token')).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: true, reason: 'Ok' });
    expect(r!.message).toContain('no managed Pods');
  });

  it('reports Unauthorized from the API server’s 401 for an unknown token', async () => {
    const [r] = await (await providerFor(kube.url, 'stolen-token')).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Unauthorized', details: { host: host() } });
    expect(kube.requests.map((q) => q.status)).toEqual([401]);
  });

  it('reports Forbidden with the Status message from the API server’s 403', async () => {
    kube.forbid('other-token', ['list']);
    const [r] = await (await providerFor(kube.url, 'other-token')).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Forbidden' });
    expect(r!.message).toBe('pods is forbidden: User "jane" cannot list resource "pods" in API group "" at the cluster scope');
  });

  it('lists in each configured namespace, so a Role there is enough, and reports Forbidden for the one it may not list', async () => {
    kube.store.namespaces.add('fleet-a');
    kube.store.namespaces.add('fleet-b');
    kube.seedPod({ metadata: { name: 'proxy-a', namespace: 'fleet-b', labels: { ...MANAGED_LABELS } } });
    kube.forbid('good-token', ['list'], ['pods'], { clusterScopeOnly: true });
    const tokenFile = join(dir, 'ns-token');
    await writeFile(tokenFile, 'good-token');
    const config = kubernetesProviderSchema.parse({
      name: 'k8s',
      type: 'kubernetes',
      server: kube.url,
      tokenFile,
      skipTLSVerify: true,
      namespace: 'fleet-a',
      namespaces: ['fleet-b'],
    });
    const p = createKubernetesProvider(config, deps());
    providers.push(p);

    const [r] = await p.check(new AbortController().signal);
    expect(r).toMatchObject({ ready: true, reason: 'Ok', message: 'listed Pods in namespaces fleet-a, fleet-b (at least one managed Pod)' });
    expect(kube.requests.map((q) => q.path)).toEqual(['/api/v1/namespaces/fleet-a/pods', '/api/v1/namespaces/fleet-b/pods']);

    const [cw] = await (await providerFor(kube.url, 'good-token')).check(new AbortController().signal);
    expect(cw).toMatchObject({ ready: false, reason: 'Forbidden' });
  });

  it('reports Error with the Status message for other HTTP errors', async () => {
    kube.injectFault({ status: 500, message: 'etcdserver: leader changed' });
    const [r] = await (await providerFor(kube.url, 'good-token')).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Error', message: 'HTTP 500: etcdserver: leader changed' });
  });

  it('reports Unreachable for a closed port', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));

    const [r] = await (await providerFor(`http://127.0.0.1:${port}`, 'good-token')).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Unreachable', details: { host: `127.0.0.1:${port}` } });
    expect(r!.message).toContain('ECONNREFUSED');
  });

  it('reports Unreachable for a server certificate it cannot verify, and Ok once caFile trusts it', async () => {
    const tls = await startFakeKubeApiserver({ tls: true, tokens: { 'good-token': 'op' } });
    try {
      const [untrusted] = await (await providerFor(tls.url, 'good-token', { skipTLSVerify: false })).check(new AbortController().signal);
      expect(untrusted).toMatchObject({ ready: false, reason: 'Unreachable' });
      expect(untrusted!.message).toMatch(/^DEPTH_ZERO_SELF_SIGNED_CERT: /);
      expect(tls.requests).toEqual([]);

      const caFile = join(dir, 'ca.pem');
      await writeFile(caFile, tls.tlsCert!.cert);
      const [trusted] = await (await providerFor(tls.url, 'good-token', { skipTLSVerify: false, caFile })).check(new AbortController().signal);
      expect(trusted).toMatchObject({ ready: true, reason: 'Ok', details: { host: new URL(tls.url).host } });
    } finally {
      await tls.close();
    }
  });

  it('reports Unreachable when the server drops the connection', async () => {
    kube.injectFault({ destroySocket: 'before-headers' });
    const [r] = await (await providerFor(kube.url, 'good-token')).check(new AbortController().signal);
    expect(r).toMatchObject({ ready: false, reason: 'Unreachable' });
  });

  it('reports Timeout once the signal ends, and really aborts the HTTP request', async () => {
    kube.injectFault({ latencyMs: 120_000 });
    const p = await providerFor(kube.url, 'good-token');
    const ac = new AbortController();
    const received = kube.nextRequest();
    const aborted = kube.nextClientAbort();

    const checking = p.check(ac.signal);
    await received;
    ac.abort();
    const [r] = await checking;

    expect(r).toMatchObject({ ready: false, reason: 'Timeout', details: { host: host() } });
    const gone = await aborted;
    expect(gone.outcome).toBe('client-aborted');
    expect(gone.path).toBe('/api/v1/pods');
  });

  // node-fetch 2 never settles a fixed-length body cut short (seen while writing the fake): only the
  // signal ends such a check.
  it('reports Timeout when the signal ends while a cut-short body is being read', async () => {
    kube.injectFault({ destroySocket: 'mid-body-fixed-length' });
    const p = await providerFor(kube.url, 'good-token');
    const ac = new AbortController();
    const destroyed = once(kube, 'destroyed');
    const checking = p.check(ac.signal);
    await destroyed;
    ac.abort();
    expect((await checking)[0]).toMatchObject({ ready: false, reason: 'Timeout' });
  });

  it('reports Timeout when the signal ends while credentials are still being resolved', async () => {
    let authStarted!: () => void;
    const inAuth = new Promise<void>((resolve) => (authStarted = resolve));
    const kc = kube.kubeConfig(null);
    // Stands in for a slow exec credential plugin: it never answers.
    kc.addAuthenticator({
      isAuthProvider: () => true,
      applyAuthentication: () => {
        authStarted();
        return new Promise(() => undefined);
      },
    });
    const config = kubernetesProviderSchema.parse({ name: 'k8s', type: 'kubernetes', server: kube.url, skipTLSVerify: true });
    const p = createKubernetesProvider(config, deps(), { kubeConfig: kc });
    providers.push(p);
    const ac = new AbortController();
    const checking = p.check(ac.signal);
    await inAuth;
    ac.abort();
    expect((await checking)[0]).toMatchObject({ ready: false, reason: 'Timeout' });
    expect(kube.requests).toEqual([]);
  });
});

describe('buildKubeConfig', () => {
  it('uses the named context of a kubeconfig file', async () => {
    const file = join(dir, 'kubeconfig');
    await writeFile(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'current-context: elsewhere',
        'clusters:',
        `- name: fake\n  cluster:\n    server: ${kube.url}\n    insecure-skip-tls-verify: true`,
        '- name: nowhere\n  cluster:\n    server: https://nowhere.invalid',
        'users:',
        '- name: op\n  user:\n    token: good-token',
        'contexts:',
        '- name: fake\n  context:\n    cluster: fake\n    user: op',
        '- name: elsewhere\n  context:\n    cluster: nowhere\n    user: op',
        '',
      ].join('\n'),
    );
    const config = kubernetesProviderSchema.parse({ name: 'k8s', type: 'kubernetes', kubeconfig: file, context: 'fake' });
    const p = createKubernetesProvider(config, deps());
    providers.push(p);
    const [r] = await p.check(new AbortController().signal);
    expect(r).toMatchObject({ reason: 'Ok', details: { host: host() } });
    expect(kube.requests[0]!.authorization).toBe('Bearer good-token');

    expect(() => buildKubeConfig({ ...config, context: 'missing' }, 'providers[0]')).toThrow(ConfigError);
    expect(() => buildKubeConfig({ ...config, context: 'missing' }, 'providers[0]')).toThrow(/providers\[0\]\.context/);
  });

  it.skipIf(Boolean(process.env.KUBERNETES_SERVICE_HOST))('fails with a ConfigError outside a cluster when nothing names a server', () => {
    expect(() => buildKubeConfig({ skipTLSVerify: false }, 'providers.k8s')).toThrow(
      /^providers\.k8s: no kubeconfig or server given and not running in a cluster/,
    );
  });

  it('rejects a missing token file and a plain-http server without skipTLSVerify, naming the field', () => {
    const base = { skipTLSVerify: true, server: kube.url };
    expect(() => buildKubeConfig({ ...base, tokenFile: join(dir, 'absent') }, 'p')).toThrow(/p\.tokenFile: cannot read/);
    expect(() => buildKubeConfig({ server: kube.url, skipTLSVerify: false, tokenFile: '/dev/null' }, 'p')).toThrow(/p\.server/);
  });
});
