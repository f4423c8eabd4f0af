/**
 * Second-client cross-check: the real kubectl (Debian's, when installed) against the fake over TLS.
 * Discovery, chunked lists (`continue`), selectors, NotFound errors, delete-and-wait (a watch with a
 * field selector), and Secrets and Services created from manifests must all work for a client the fake
 * was not written against.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';
import { KubectlHarness } from './kubectl-harness.ts';
import { describeWithTool } from '../../support/required-tools.ts';

let kube: FakeKubeApiserver;
let harness: KubectlHarness;

beforeEach(async () => {
  kube = await startFakeKubeApiserver({ tls: true });
  harness = await KubectlHarness.create(kube);
});
afterEach(async () => {
  await kube.close();
});

const kubectl = (...args: string[]): ReturnType<KubectlHarness['run']> => harness.run(...args);

describeWithTool('kubectl', 'kubectl against the fake apiserver', { timeout: 120_000 }, () => {
  it('lists across chunks with a selector', async () => {
    for (const [ns, name, pool] of [
      ['a', 'p1', 'eu'],
      ['a', 'p2', 'us'],
      ['b', 'p3', 'eu'],
      ['c', 'p4', 'asia'],
    ] as const) {
      kube.seedPod({ metadata: { name, namespace: ns, labels: { app: 'egress-proxy', pool } } });
    }
    const r = await kubectl('get', 'pods', '-A', '-l', 'app=egress-proxy,pool in (eu,us)', '--chunk-size=1', '-o', 'name');
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(['pod/p1', 'pod/p2', 'pod/p3']);
    const lists = kube.requests.filter((q) => q.path === '/api/v1/pods');
    expect(lists.length).toBeGreaterThan(1);
    expect(lists.slice(1).every((q) => q.query.continue)).toBe(true);
  });

  it('shows the Status message of a 404', async () => {
    const r = await kubectl('get', 'pod', 'ghost', '-n', 'default');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('Error from server (NotFound): pods "ghost" not found');
  });

  it('deletes a terminating Pod and waits for it through a watch', async () => {
    kube.seedPod({ metadata: { name: 'busy', namespace: 'default' } });
    kube.setPodStatus('default', 'busy', { phase: 'Running' });
    const deleting = kubectl('delete', 'pod', 'busy', '-n', 'default', '--timeout=60s');
    const watchReq = await new Promise<unknown>((resolve) => {
      const onRequest = (r: { query: Record<string, string> }): void => {
        if (r.query.watch === 'true') {
          kube.off('request', onRequest);
          resolve(r);
        }
      };
      kube.on('request', onRequest);
    });
    expect(watchReq).toMatchObject({ query: { fieldSelector: 'metadata.name=busy' } });
    expect(kube.getPod('default', 'busy')?.metadata.deletionTimestamp).toBeDefined();
    kube.finishPodDeletion('default', 'busy');
    const r = await deleting;
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('pod "busy" deleted');
  });

  // kubectl's typed commands (`create secret generic`, `auth can-i`) send protobuf, which the fake does not
  // decode; `create -f` sends JSON.
  it('creates a Secret from a manifest (stringData merged into base64 data) and reads it back', async () => {
    await harness.file(
      'secret.json',
      JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'creds' }, stringData: { PROXY_USER: 'u1', PROXY_PASSWORD: 'p w' } }),
    );
    const created = await kubectl('create', '--validate=false', '-n', 'default', '-f', join(harness.dir, 'secret.json'));
    expect(created.stdout).toContain('secret/creds created');
    expect(kube.getSecret('default', 'creds')).toMatchObject({
      type: 'Opaque',
      data: { PROXY_USER: Buffer.from('u1').toString('base64'), PROXY_PASSWORD: Buffer.from('p w').toString('base64') },
    });
    const read = await kubectl('get', 'secret', 'creds', '-n', 'default', '-o', 'jsonpath={.data.PROXY_PASSWORD}');
    expect(Buffer.from(read.stdout, 'base64').toString()).toBe('p w');
    const again = await kubectl('create', '--validate=false', '-n', 'default', '-f', join(harness.dir, 'secret.json'));
    expect(again.stderr).toContain('Error from server (AlreadyExists)');
    expect(again.stderr).toContain('secrets "creds" already exists');
  });

  it('creates a NodePort Service and reads its allocated port', async () => {
    await harness.file(
      'svc.json',
      JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'px' }, spec: { type: 'NodePort', ports: [{ port: 3128 }] } }),
    );
    expect((await kubectl('create', '--validate=false', '-n', 'default', '-f', join(harness.dir, 'svc.json'))).code).toBe(0);
    const port = await kubectl('get', 'service', 'px', '-n', 'default', '-o', 'jsonpath={.spec.ports[0].nodePort}');
    expect(Number(port.stdout)).toBeGreaterThanOrEqual(30000);
    expect(Number(port.stdout)).toBe((kube.getService('default', 'px') as unknown as { spec: { ports: { nodePort: number }[] } }).spec.ports[0]?.nodePort);
  });
});
