/**
 * The rendered install applied the way a user applies it: the real kubectl, `kubectl apply -f`
 * (client-side, then again to see nothing change) and `kubectl apply --server-side`,
 * against the fake kube-apiserver over TLS. The third-party kinds (ServiceMonitor, KEDA) come from
 * minimal CRDs registered first, as their operators would have.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { renderInstall, type KubeObject, type Variant } from '../support/kube-install.ts';
import { THIRD_PARTY_CRDS } from '../support/third-party-crds.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { describeWithTool } from '../support/required-tools.ts';

const run = promisify(execFile);

let kube: FakeKubeApiserver;
let dir: string;

beforeEach(async () => {
  kube = await startFakeKubeApiserver({ tls: true });
  dir = await tempDir('egress-kubectl-apply-');
  await writeFile(join(dir, 'ca.pem'), kube.tlsCert!.cert);
  for (const crd of THIRD_PARTY_CRDS) kube.registerCrd(crd);
});
afterEach(async () => {
  await kube.close();
});

async function kubectl(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  const base = ['--server', kube.url, '--token', kube.token, '--certificate-authority', join(dir, 'ca.pem'), '--cache-dir', join(dir, 'cache')];
  try {
    const { stdout, stderr } = await run('kubectl', [...base, ...args], {
      env: { ...process.env, KUBECONFIG: join(dir, 'none') },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { stdout, stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { stdout: err.stdout, stderr: err.stderr, code: err.code };
  }
}

/**
 * Kinds of the install the fake does not serve (its header lists what it does); they are left out
 * of what is applied here, and only they: their schemas are still checked by kubernetes-install.test.ts.
 */
const NOT_SERVED_BY_THE_FAKE = new Set(['networking.k8s.io/v1/NetworkPolicy']);

/** The install rendered to a file (less the kinds the fake does not serve), and the objects in it. */
async function rendered(variant: Variant): Promise<{ file: string; objects: KubeObject[] }> {
  const { objects: all } = await renderInstall(variant);
  const objects = all.filter((o) => !NOT_SERVED_BY_THE_FAKE.has(`${o.apiVersion}/${o.kind}`));
  const file = join(dir, `${variant}.yaml`);
  // As kubectl sends a Secret's data: kustomize's YAML wraps long base64 at 76 characters, which the server would store re-encoded without the breaks.
  const unwrapped = objects.map((o) =>
    o.kind === 'Secret' ? { ...o, data: Object.fromEntries(Object.entries(o.data as Record<string, string>).map(([k, v]) => [k, v.replace(/\s/g, '')])) } : o,
  );
  await writeFile(file, unwrapped.map((o) => stringify(o)).join('---\n'));
  return { file, objects };
}

/** How kubectl names an object in its output: `<kind lower-cased>[.<group>]/<name>`. */
function printed(obj: KubeObject): string {
  const group = obj.apiVersion.includes('/') ? obj.apiVersion.split('/')[0] : '';
  return `${obj.kind.toLowerCase()}${group ? `.${group}` : ''}/${obj.metadata.name}`;
}

describeWithTool('kubectl', 'kubectl apply of the install against the fake apiserver', { timeout: 180_000 }, () => {
  it('creates every object with kubectl apply -f, and a second apply changes nothing', async () => {
    const { file, objects } = await rendered('default');
    const first = await kubectl('apply', '--validate=false', '-f', file);
    expect(first.code, first.stderr).toBe(0);
    for (const obj of objects) expect(first.stdout, first.stdout).toContain(`${printed(obj)} created`);
    const again = await kubectl('apply', '--validate=false', '-f', file);
    expect(again.code, again.stderr).toBe(0);
    // A PodDisruptionBudget's selector has the patch strategy "replace", so kubectl's patch for it is never
    // empty and it reports "configured" at every apply, against a real server too; the patch changes nothing.
    for (const obj of objects)
      expect(again.stdout, again.stdout).toContain(`${printed(obj)} ${obj.kind === 'PodDisruptionBudget' ? 'configured' : 'unchanged'}`);
    const pdb = await kubectl('get', 'pdb', '-n', 'egress-proxies', 'egress-worker', '-o', 'jsonpath={.metadata.generation} {.spec.maxUnavailable}');
    expect(pdb.stdout).toBe('1 1');
    const crds = await kubectl('get', 'crd', '-o', 'name');
    expect(crds.stdout).toContain('customresourcedefinition.apiextensions.k8s.io/providerhealths.egress-proxies.io');
    const deployments = await kubectl('get', 'deployments', '-n', 'egress-proxies', '-o', 'name');
    expect(deployments.stdout.trim().split('\n').sort()).toEqual(['scheduler', 'worker', 'publisher', 'api'].map((r) => `deployment.apps/egress-${r}`).sort());
    // The install's CRDs are served: ProviderHealth by its short name, as an operator of the install would ask.
    const ph = await kubectl('get', 'ph');
    expect(ph.code, ph.stderr).toBe(0);
    // A ProxyPool is applied as a user writes it (kubectl apply -f pool.yaml) and listed by its short name with its columns.
    const pool = join(dir, 'pool.yaml');
    await writeFile(
      pool,
      stringify({
        apiVersion: 'egress-proxies.io/v1alpha1',
        kind: 'ProxyPool',
        metadata: { name: 'crawl', namespace: 'egress-proxies' },
        spec: { replicas: 3, template: { spec: { provider: 'cluster' } }, maxAge: '30m' },
      }),
    );
    const applied = await kubectl('apply', '-f', pool);
    expect(applied.stdout, applied.stderr).toContain('proxypool.egress-proxies.io/crawl created');
    const pxp = await kubectl('get', 'pxp', '-n', 'egress-proxies');
    expect(pxp.code, pxp.stderr).toBe(0);
    expect(pxp.stdout.split('\n')[0]?.split(/\s+/).filter(Boolean)).toEqual(['NAME', 'REPLICAS', 'DESIRED', 'READY', 'ROTATING', 'FAILED', 'AGE']);
    // The spec's count at once; DESIRED waits for the pool reconcile's status (none runs here).
    expect(pxp.stdout).toMatch(/^crawl\s+3\s/m);
  });

  it('applies server-side too, with the KEDA component', async () => {
    const { file, objects } = await rendered('keda');
    const r = await kubectl('apply', '--server-side', '--validate=false', '--field-manager', 'egress-install', '-f', file);
    expect(r.code, r.stderr).toBe(0);
    for (const obj of objects) expect(r.stdout, r.stdout).toContain(`${printed(obj)} serverside-applied`);
    const scaled = await kubectl(
      'get',
      'scaledobjects.keda.sh',
      '-n',
      'egress-proxies',
      'egress-worker',
      '-o',
      'jsonpath={.spec.triggers[*].metadata.listName}',
    );
    expect(scaled.stdout.split(' ').sort()).toEqual(['{egress}:checks:wait', '{egress}:gc:wait', '{egress}:reconcile:wait']);
  });
});
