import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { parseConfigDocument } from '../../src/config/file.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import type { JobView } from '../../src/jobs/job-inspection.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { podEnv, startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { testConfig } from '../support/config.ts';
import { startContainerProxy, type ContainerProxy } from '../support/container-proxy.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/temp-dirs.ts';

// Proxies on kubernetes and gcp through the whole pipeline (API → reconcile queue → worker →
// the real client libraries → the fakes). The fake apiserver has no kubelet: the test plays it,
// running a real forward proxy with the credentials the Pod was given and reporting the Pod Running.
describe('proxies on kubernetes and gcp, end to end against the fakes', () => {
  let roles: RunningRoles;
  let api: string;
  let kube: FakeKubeApiserver;
  let compute: FakeCompute;
  // The test's kubelet: a real forward proxy that accepts the credentials the Pod was given.
  let kubelet: ContainerProxy;

  beforeAll(async () => {
    kubelet = await startContainerProxy();
    kube = await startFakeKubeApiserver({ tokens: { 'kube-token': 'system:serviceaccount:egress:operator' } });
    kube.store.namespaces.add('proxies');
    kube.store.namespaces.add('lb');
    kube.store.namespaces.add('tight');
    compute = await startFakeCompute({ project: 'egress-test', tokens: ['gcp-token'] });
    const dir = await tempDir('egress-cloud-e2e-');
    await writeFile(join(dir, 'kube-token'), 'kube-token\n');
    await writeFile(join(dir, 'gcp-token'), 'gcp-token\n');
    const { providers } = parseConfigDocument(
      {
        providers: [
          {
            name: 'k8s',
            type: 'kubernetes',
            server: kube.url,
            tokenFile: join(dir, 'kube-token'),
            skipTLSVerify: true,
            namespace: 'proxies',
            proxies: { port: kubelet.port },
          },
          // The same cluster, proxies behind a LoadBalancer Service (the test plays the cloud controller).
          {
            name: 'k8s-lb',
            type: 'kubernetes',
            server: kube.url,
            tokenFile: join(dir, 'kube-token'),
            skipTLSVerify: true,
            namespace: 'lb',
            proxies: { port: kubelet.port, service: { type: 'LoadBalancer' } },
          },
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
        ],
      },
      'test',
    );
    // A 1 s job lock was lost on a loaded CI machine while the Compute client loaded (a stall of the
    // event loop): the job ran twice and inserted twice. Nothing here tests stalled-job recovery.
    roles = await runRoles(testConfig({ providers, queues: ['reconcile'], lockDurationMs: 30_000 }), ['worker', 'api'], silentLogger());
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles?.close();
    await kubelet?.close();
    await kube?.close();
    await compute?.close();
  });

  const apply = (yaml: string) => fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: yaml });
  const proxy = async (name: string) => (await (await fetch(`${api}/v1/proxies/${name}`)).json()) as ProxyView;

  test('a quota failure ends the proxy Failed with the provider’s message, after exactly one insert', async () => {
    compute.failNextOperation({ code: 'QUOTA_EXCEEDED', message: "Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1." });
    expect((await apply('metadata: { name: gce-1 }\nspec: { provider: gce }\n')).status).toBe(200);
    const failed = await waitFor('gce-1 to fail', async () => {
      const p = await proxy('gce-1');
      return p.status.phase === 'Failed' ? p : undefined;
    });
    expect(failed.status.lastError).toContain("Quota 'CPUS' exceeded.");
    expect(compute.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/instances'))).toHaveLength(1);
  });

  test('a Pod is created with the owner labels, and the proxy turns Ready once the Pod runs a working proxy', async () => {
    expect((await apply('metadata: { name: k8s-1, labels: { team: crawl } }\nspec: { provider: k8s }\n')).status).toBe(200);
    const pod = await waitFor('the Pod', () => kube.listPods('proxies').find((p) => p.metadata.labels?.['egress-proxies/proxy'] === 'k8s-1'));
    expect(pod.metadata.labels).toMatchObject({ app: 'egress-proxy', 'managed-by': 'egress-proxies', 'egress-proxies/proxy': 'k8s-1' });
    expect((await proxy('k8s-1')).status.phase).toBe('Provisioning');
    // Play the kubelet: resolve the Pod's env (the credentials come from its Secret by secretKeyRef); the
    // Pod's proxy accepts them; the Pod runs and is Ready.
    const env = podEnv(kube, pod);
    expect(env.PROXY_PORT).toBe(String(kubelet.port));
    expect(JSON.stringify(pod.spec)).not.toContain(env.PROXY_PASSWORD);
    kubelet.credentials.user = env.PROXY_USER ?? '';
    kubelet.credentials.password = env.PROXY_PASSWORD ?? '';
    kube.setPodStatus('proxies', pod.metadata.name, { phase: 'Running', podIP: '127.0.0.1', ready: true });
    const ready = await waitFor('k8s-1 to be Ready', async () => {
      const v = await proxy('k8s-1');
      return v.status.phase === 'Ready' ? v : undefined;
    });
    expect(ready.status).toMatchObject({ url: `http://127.0.0.1:${kubelet.port}`, egressIp: '127.0.0.1' });
    expect(ready.proxyUrl).toBe(
      `http://${encodeURIComponent(kubelet.credentials.user)}:${encodeURIComponent(kubelet.credentials.password)}@127.0.0.1:${kubelet.port}`,
    );
  });

  test('a ResourceQuota refusal of the Pod ends the proxy Failed with the server’s message', async () => {
    kube.setQuota('tight', { pods: 0 }, 'no-pods');
    expect((await apply('metadata: { name: k8s-quota }\nspec: { provider: k8s, placement: tight }\n')).status).toBe(200);
    const failed = await waitFor('k8s-quota to fail', async () => {
      const p = await proxy('k8s-quota');
      return p.status.phase === 'Failed' ? p : undefined;
    });
    expect(failed.status.lastError).toMatch(
      /^creating Pod "ep-k8s-quota-[a-z0-9]+" in namespace "tight": pods "ep-k8s-quota-[a-z0-9]+" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0$/,
    );
    expect(kube.listPods('tight')).toEqual([]);
  });

  test('an RBAC refusal of the Pod create fails its job once, not the proxy; once access is granted the next look makes the Pod', async () => {
    kube.forbid('kube-token', ['create'], ['pods']);
    let failed: JobView | undefined;
    try {
      expect((await apply('metadata: { name: k8s-rbac }\nspec: { provider: k8s }\n')).status).toBe(200);
      await waitFor('a refused review', () =>
        kube.requests.find((r) => r.path.endsWith('/selfsubjectaccessreviews') && r.responseBody?.includes('"allowed":false')),
      );
      // A retry alone cannot get past a 403: the job fails at once instead of spending its attempts.
      failed = await waitFor('the failed reconcile job of k8s-rbac', async () => {
        const { items } = (await (await fetch(`${api}/v1/jobs?state=failed&queue=reconcile`)).json()) as { items: JobView[] };
        return items.find((j) => (j.data as { proxy?: string }).proxy === 'k8s-rbac');
      });
      expect(failed.attemptsMade).toBe(1);
      expect(failed.failedReason).toContain('cannot create resource "pods"');
      expect((await proxy('k8s-rbac')).status.phase).toBe('Provisioning');
    } finally {
      kube.allow('kube-token');
    }
    // The next look (the periodic resync; here an operator's retry of the failed job) makes the Pod.
    expect((await fetch(`${api}/v1/jobs/${failed.id}/retry?queue=reconcile`, { method: 'POST' })).status).toBe(200);
    await waitFor('the Pod of k8s-rbac', () => kube.listPods('proxies').find((p) => p.metadata.labels?.['egress-proxies/proxy'] === 'k8s-rbac'), 30_000);
    expect((await proxy('k8s-rbac')).status.phase).toBe('Provisioning');
  });

  test('behind a LoadBalancer Service, the proxy waits for the load balancer and its URL is the ingress address', async () => {
    expect((await apply('metadata: { name: k8s-lb-1 }\nspec: { provider: k8s-lb }\n')).status).toBe(200);
    const pod = await waitFor('the Pod', () => kube.listPods('lb').find((p) => p.metadata.labels?.['egress-proxies/proxy'] === 'k8s-lb-1'));
    const env = podEnv(kube, pod);
    kubelet.credentials.user = env.PROXY_USER ?? '';
    kubelet.credentials.password = env.PROXY_PASSWORD ?? '';
    kube.setPodStatus('lb', pod.metadata.name, { phase: 'Running', podIP: '10.0.0.9', ready: true });
    await waitFor('the wait for the load balancer to show', async () => (await proxy('k8s-lb-1')).status.lastError?.includes('waiting for the load balancer'));
    expect((await proxy('k8s-lb-1')).status.phase).toBe('Provisioning');
    kube.setServiceLoadBalancer('lb', pod.metadata.name, [{ ip: '127.0.0.1' }]);
    const ready = await waitFor('k8s-lb-1 to be Ready', async () => {
      const v = await proxy('k8s-lb-1');
      return v.status.phase === 'Ready' ? v : undefined;
    });
    expect(ready.status.url).toBe(`http://127.0.0.1:${kubelet.port}`);
  });
});
