/**
 * Second-client cross-check: the real gcloud CLI (when installed) against the fake Compute API, through
 * its endpoint override. Lists with paging, describe, label changes under the fingerprint precondition and
 * delete with operation polling must work for a client the fake was not written against.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCompute, type FakeCompute } from './index.ts';

const run = promisify(execFile);
const hasGcloud = await run('gcloud', ['version'], { timeout: 30_000 }).then(
  () => true,
  () => false,
);

const Z = 'us-central1-a';
let compute: FakeCompute;
let dir: string;

beforeEach(async () => {
  compute = await startFakeCompute({ project: 'egress-test' });
  dir = await mkdtemp(join(tmpdir(), 'egress-gcloud-'));
  await writeFile(join(dir, 'token'), 'fake-access-token');
});
afterEach(async () => {
  await compute.close();
  await rm(dir, { recursive: true, force: true });
});

async function gcloud(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  const env = {
    ...process.env,
    CLOUDSDK_CONFIG: join(dir, 'config'),
    CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE: `${compute.url}/compute/v1/`,
    CLOUDSDK_CORE_DISABLE_PROMPTS: '1',
  };
  try {
    const { stdout, stderr } = await run('gcloud', [...args, '--project', 'egress-test', '--access-token-file', join(dir, 'token')], { env, timeout: 150_000 });
    return { stdout, stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { stdout: err.stdout, stderr: err.stderr, code: err.code };
  }
}

// gcloud starts a Python interpreter per call (2–3 s idle, far more on a loaded machine): generous ceilings.
describe.skipIf(!hasGcloud)('gcloud against the fake Compute API', { timeout: 300_000 }, () => {
  it('lists every instance across pages', async () => {
    for (let i = 0; i < 5; i++) compute.seedInstance(i % 2 ? Z : 'europe-west1-b', { name: `p${i}`, labels: { 'managed-by': 'egress-proxies' } });
    const r = await gcloud('compute', 'instances', 'list', '--page-size=2', '--format=value(name)');
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
    const lists = compute.requests.filter((q) => q.path.endsWith('/aggregated/instances'));
    expect(lists.length).toBe(3);
    expect(lists[0]!.query.maxResults).toBe('2');
    expect(lists.slice(1).every((q) => q.query.pageToken)).toBe(true);
  });

  it('adds labels with the fingerprint and deletes, polling the operations', async () => {
    compute.setOperationPolls(1);
    compute.seedInstance(Z, { name: 'vm', labels: { 'managed-by': 'egress-proxies' } });
    const labelled = await gcloud('compute', 'instances', 'add-labels', 'vm', `--zone=${Z}`, '--labels=pool=eu');
    expect(
      labelled.code,
      `${labelled.stderr}\n${compute.requests.map((q) => `${q.method} ${q.path} ${q.status ?? q.outcome} ${q.responseBody?.slice(0, 300) ?? ''}`).join('\n')}`,
    ).toBe(0);
    expect(compute.getInstance(Z, 'vm')!.labels).toEqual({ 'managed-by': 'egress-proxies', pool: 'eu' });

    const deleted = await gcloud('compute', 'instances', 'delete', 'vm', `--zone=${Z}`, '--quiet');
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(compute.getInstance(Z, 'vm')).toBeUndefined();
    expect(compute.requests.some((q) => q.method === 'POST' && q.path.endsWith('/setLabels'))).toBe(true);
    expect(compute.requests.some((q) => q.method === 'DELETE')).toBe(true);
  });

  it('creates and updates a firewall rule, polling global operations, and shows a validation error', async () => {
    compute.setOperationPolls(1);
    const created = await gcloud(
      'compute',
      'firewall-rules',
      'create',
      'allow-proxy',
      '--network=default',
      '--allow=tcp:3128',
      '--source-ranges=203.0.113.0/24',
      '--target-tags=egress-proxy-gce',
    );
    expect(created.code, created.stderr).toBe(0);
    expect(compute.getFirewall('allow-proxy')).toMatchObject({
      sourceRanges: ['203.0.113.0/24'],
      targetTags: ['egress-proxy-gce'],
      allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }],
    });
    const updated = await gcloud('compute', 'firewall-rules', 'update', 'allow-proxy', '--source-ranges=198.51.100.0/24');
    expect(updated.code, updated.stderr).toBe(0);
    expect(compute.getFirewall('allow-proxy')?.sourceRanges).toEqual(['198.51.100.0/24']);
    expect(compute.requests.some((q) => q.method === 'PATCH' && q.path.endsWith('/global/firewalls/allow-proxy'))).toBe(true);
    expect(compute.requests.some((q) => q.path.includes('/global/operations/'))).toBe(true);
    const bad = await gcloud('compute', 'firewall-rules', 'create', 'bad-rule', '--allow=tcp:3128', '--source-ranges=10.0.0.0/33');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('sourceRanges');
  });

  it('starts a preempted instance, polling the zone operation', async () => {
    compute.seedInstance(Z, { name: 'spot', networkInterfaces: [{ accessConfigs: [{}] }] });
    compute.preemptInstance(Z, 'spot');
    const started = await gcloud('compute', 'instances', 'start', 'spot', `--zone=${Z}`);
    expect(started.code, started.stderr).toBe(0);
    expect(compute.getInstance(Z, 'spot')?.status).toBe('RUNNING');
    expect(compute.getInstance(Z, 'spot')?.networkInterfaces[0]?.accessConfigs?.[0]?.natIP).toBeTruthy();
  });

  it('shows the API error of a missing instance', async () => {
    const r = await gcloud('compute', 'instances', 'describe', 'ghost', `--zone=${Z}`);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("The resource 'projects/egress-test/zones/us-central1-a/instances/ghost' was not found");
  });
});
