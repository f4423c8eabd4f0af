/**
 * `--store kubernetes` end to end: every role in one process (as `egress up`), the local provider, the
 * fake kube-apiserver with the generated CRDs applied by the real kubectl, and a user who only speaks
 * kubectl: `apply -f proxy.yaml` → Ready in `get px` (and `get px -w` shows the phase change), `get ph`
 * and `get ph -o yaml` show the published health, `delete px` returns once the instance is gone.
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { KubectlHarness } from '../fakes/kube-apiserver/kubectl-harness.ts';
import { testConfig } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';
import { describeWithTool } from '../support/required-tools.ts';

const root = join(import.meta.dirname, '..', '..');

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

describeWithTool('kubectl', '--store kubernetes with kubectl', () => {
  let kube: FakeKubeApiserver;
  let k: KubectlHarness;
  let roles: RunningRoles | undefined;
  let watcher: ReturnType<KubectlHarness['start']> | undefined;

  beforeAll(async () => {
    kube = await startFakeKubeApiserver({ tls: true });
    k = await KubectlHarness.create(kube);
    const crds = await k.run('apply', '-f', join(root, 'deploy/kubernetes/crds'));
    expect(crds).toMatchObject({ code: 0 });
    const tokenFile = await k.file('token', `${kube.token}\n`);
    roles = await runRoles(
      testConfig({
        queues: ['checks', 'reconcile'],
        intervalMs: 60_000,
        store: {
          kind: 'kubernetes',
          connection: { server: kube.url, tokenFile, caFile: join(k.dir, 'ca.pem'), skipTLSVerify: false },
          namespace: 'default',
        },
      }),
      ['publisher', 'worker', 'scheduler', 'api'],
      silentLogger(),
    );
  });
  afterAll(async () => {
    if (watcher) {
      watcher.child.kill();
      await watcher.exited;
    }
    await roles?.close();
    await kube.close();
  });

  test('kubectl apply → Ready in get px; get ph shows the health; delete px returns once the instance is gone', async () => {
    watcher = k.start('get', 'px', '-w');
    const proxyFile = await k.file(
      'proxy.yaml',
      stringify({ apiVersion: 'egress-proxies.io/v1alpha1', kind: 'Proxy', metadata: { name: 'web', namespace: 'default' }, spec: { provider: 'local' } }),
    );
    expect(await k.run('apply', '-f', proxyFile)).toMatchObject({ code: 0, stdout: 'proxy.egress-proxies.io/web created\n' });

    await waitFor('the Proxy Ready in kubectl get px', async () => {
      const got = await k.run('get', 'px', 'web', '-o', 'jsonpath={.status.phase}');
      return got.stdout === 'Ready' || undefined;
    });
    const table = (await k.run('get', 'px')).stdout.split('\n');
    expect(table[0]).toMatch(/^NAME\s+PROVIDER\s+PHASE\s+AGE$/);
    expect(table[1]).toMatch(/^web\s+local\s+Ready\s+\S+$/);
    await waitFor('the phase change in kubectl get px -w', () => /web\s+local\s+Ready/.test(watcher?.output() ?? '') || undefined);
    const watched = (watcher.output().match(/^web\s.*$/gm) ?? []).map((line) => line.split(/\s+/)[2]);
    expect(watched.length).toBeGreaterThan(1);
    expect(watched[0]).not.toBe('Ready');
    expect(watched.at(-1)).toBe('Ready');

    const px = parse((await k.run('get', 'px', 'web', '-o', 'yaml')).stdout) as {
      metadata: { finalizers: string[] };
      status: { url: string; credentialsSecretRef: { name: string }; observedGeneration: number; conditions: { type: string; status: string }[] };
    };
    expect(px.metadata.finalizers).toEqual(['egress-proxies.io/instance']);
    expect(px.status.observedGeneration).toBe(1);
    expect(px.status.conditions).toContainEqual(expect.objectContaining({ type: 'Ready', status: 'True' }));
    expect(px.status.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await k.run('get', 'secret', px.status.credentialsSecretRef.name)).code).toBe(0);

    await waitFor('the local ProviderHealth in kubectl get ph', async () => /^local\s+true\s+1\/1\s+/m.test((await k.run('get', 'ph')).stdout) || undefined);
    expect((await k.run('get', 'ph')).stdout.split('\n')[0]).toMatch(/^NAME\s+READY\s+TARGETS\s+LAST CHECK\s+AGE$/);
    const ph = parse((await k.run('get', 'ph', 'local', '-o', 'yaml')).stdout) as { status: { ready: boolean; targets: { name: string; reason: string }[] } };
    expect(ph.status.ready).toBe(true);
    expect(ph.status.targets.map((t) => [t.name, t.reason])).toEqual([['localhost', 'Ok']]);

    const url = new URL(px.status.url);
    expect(await portOpen(url.hostname, Number(url.port))).toBe(true);
    const deleted = await k.run('delete', 'px', 'web');
    expect(deleted).toMatchObject({ code: 0, stdout: 'proxy.egress-proxies.io "web" deleted\n' });
    // kubectl delete waits for the finalizer: by now reconcile has removed the instance.
    expect(await portOpen(url.hostname, Number(url.port))).toBe(false);
    expect((await k.run('get', 'px', 'web')).code).not.toBe(0);
  });
});
