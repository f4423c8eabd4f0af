/**
 * The proxy user-data, booted: what the kvm lifecycle puts in its NoCloud seed and what the gcp
 * lifecycle sends as `user-data` are interpreted on this machine in a throw-away sandbox (new PID,
 * mount and network namespaces; tmpfs over the directories the user-data writes), and requests go
 * through the proxy it starts: 200 with the credentials, 407 without. On gcp the policy follows
 * the metadata item while the proxy runs.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { OAuth2Client } from 'google-auth-library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { createLogger } from '../../src/logging.ts';
import { createComputeClients, type ComputeClients } from '../../src/providers/gcp/index.ts';
import { createGcpLifecycle, METADATA_POLICY, METADATA_STARTUP_SCRIPT, METADATA_USER_DATA } from '../../src/providers/gcp/lifecycle.ts';
import { seedImage } from '../../src/providers/kvm/seed.ts';
import { ProvisioningError, type InstanceSpec } from '../../src/providers/lifecycle.ts';
import { renderUserData } from '../../src/providers/boot/cloud-init.ts';
import { bootPrograms } from '../../src/providers/boot/programs.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { DYNAMIC_UID } from '../support/cloud-config-interpreter.ts';
import { bootInSandbox } from '../support/cloud-init-boot.ts';
import { readIso9660 } from '../support/iso9660-reader.ts';

const run = promisify(execFile);
const PASSWORD = `pw-${process.pid}-Zq9_x-secret`;
const spec = (name: string): InstanceSpec => ({ name, owner: { fleet: 'fleet-a', proxy: 'alpha' }, credentials: { username: 'u-alpha', password: PASSWORD } });
const allowLoopback = JSON.stringify(proxyEgressPolicy({ allow: ['127.0.0.0/8'], deny: [] }, undefined));
const defaultDeny = JSON.stringify(proxyEgressPolicy(undefined, undefined));

describe('kvm: the NoCloud seed', () => {
  it('is an ISO 9660 volume labelled CIDATA with user-data and meta-data, and its user-data boots a proxy: 200 with the credentials, 407 without', async () => {
    const image = await seedImage(spec('ep-seed-1'), 3128, allowLoopback);
    const iso = readIso9660(image);
    expect(iso.label).toBe('CIDATA');
    expect([...iso.files.keys()].sort()).toEqual(['meta-data', 'user-data']);
    expect(iso.files.get('meta-data')?.toString()).toBe('instance-id: ep-seed-1\nlocal-hostname: ep-seed-1\n');

    // blkid (util-linux) identifies it as cloud-init does: by type and label.
    const dir = await mkdtemp(join(tmpdir(), 'egress-seed-'));
    try {
      await writeFile(join(dir, 'seed.iso'), image);
      const { stdout } = await run('blkid', ['-p', '-o', 'export', join(dir, 'seed.iso')]);
      expect(stdout).toMatch(/^TYPE=iso9660$/m);
      expect(stdout).toMatch(/^LABEL=CIDATA$/m);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }

    const userData = iso.files.get('user-data')?.toString('utf8') ?? '';
    const report = await bootInSandbox(userData, { proxyPort: 3128, credentials: spec('x').credentials });
    expect(report.packages).toEqual(['nodejs']);
    const files = Object.fromEntries(report.files.map((f) => [f.path, f]));
    expect(files['/opt/egress-proxy/proxy.env']).toMatchObject({ mode: 0o600, uid: 0 });
    expect(files['/opt/egress-proxy/policy.json']).toMatchObject({ mode: 0o644, uid: 0 });
    expect(files['/opt/egress-proxy/proxy-process.cjs']?.bytes).toBeGreaterThan(100_000);
    // Non-root, stopped cleanly by SIGTERM.
    expect(report.units).toEqual([{ name: 'egress-proxy.service', uid: DYNAMIC_UID, exitCode: 0 }]);
    expect(report.rounds).toEqual([{ withCredentials: 200, withoutCredentials: 407, wrongPassword: 407, body: 'origin says hello' }]);
    expect(report.log.join('\n')).not.toContain(PASSWORD);
    expect(report.stderr).not.toContain(PASSWORD);
  });

  it('is the same bytes for the same proxy (a retried or concurrent ensure rewrites what is there)', async () => {
    const a = await seedImage(spec('ep-seed-2'), 3128, defaultDeny);
    const b = await seedImage(spec('ep-seed-2'), 3128, defaultDeny);
    expect(a.equals(b)).toBe(true);
    expect(a.equals(await seedImage(spec('ep-seed-3'), 3128, defaultDeny))).toBe(false);
  });
});

describe('gcp: user-data metadata', () => {
  let compute: FakeCompute;
  let clients: ComputeClients;
  beforeAll(async () => {
    compute = await startFakeCompute({ project: 'egress-test', tokens: ['good-token'] });
    const auth = new OAuth2Client();
    auth.setCredentials({ access_token: 'good-token', expiry_date: Date.now() + 3_600_000 });
    clients = createComputeClients({ ...compute.clientOptions(), authClient: auth });
  });
  afterAll(async () => {
    await clients.close();
    await compute.close();
  });

  it('an insert carries user-data and a startup script; booted, the proxy follows the policy item while it runs', async () => {
    let logText = '';
    const logger = createLogger({ level: 'debug', destination: new Writable({ write: (c: Buffer, _e, done) => ((logText += c.toString()), done()) }) });
    const lc = createGcpLifecycle({
      clients,
      project: 'egress-test',
      zone: 'us-central1-a',
      image: 'projects/debian-cloud/global/images/family/debian-12',
      logger,
      operationPollMs: 0,
      bootUserData: true,
      egressPolicy: proxyEgressPolicy({ allow: ['127.0.0.0/8'], deny: [] }, undefined),
    });
    await lc.ensureInstance(spec('ep-gcp-boot'), AbortSignal.timeout(30_000));
    const items = Object.fromEntries((compute.getInstance('us-central1-a', 'ep-gcp-boot')?.metadata.items ?? []).map((i) => [i.key, i.value]));
    expect(items[METADATA_STARTUP_SCRIPT]).toMatch(/^#!\/bin\/sh\n/);
    expect(items[METADATA_POLICY]).toBe(allowLoopback);
    const userData = items[METADATA_USER_DATA] ?? '';
    expect(userData).toMatch(/^#cloud-config\n/);
    expect(logText).not.toContain(PASSWORD);

    // The fake metadata server serves the item, then a changed one (what setMetadata does).
    const report = await bootInSandbox(userData, {
      proxyPort: 3128,
      credentials: spec('x').credentials,
      metadataPolicies: [items[METADATA_POLICY] ?? '', defaultDeny],
    });
    expect(report.units.map((u) => [u.name, u.uid === 0 ? 'root' : u.uid, u.exitCode])).toEqual([
      ['egress-proxy-policy.service', 'root', 0],
      ['egress-proxy.service', DYNAMIC_UID, 0],
    ]);
    expect(report.rounds).toEqual([
      { withCredentials: 200, withoutCredentials: 407, wrongPassword: 407, body: 'origin says hello' },
      // The default deny now refuses loopback, before any connection.
      { withCredentials: 403, withoutCredentials: 407, wrongPassword: 407, body: expect.stringContaining('Forbidden by egress policy') },
    ]);
    expect(report.policyFile).toEqual({ mode: 0o644, uid: 0 });
    expect(report.log.join('\n')).not.toContain(PASSWORD);
  });

  it('without bootUserData an insert carries neither item', async () => {
    const lc = createGcpLifecycle({
      clients,
      project: 'egress-test',
      zone: 'us-central1-a',
      image: 'projects/p/global/images/i',
      logger: createLogger({ level: 'silent' }),
      operationPollMs: 0,
    });
    await lc.ensureInstance(spec('ep-gcp-plain'), AbortSignal.timeout(30_000));
    const keys = (compute.getInstance('us-central1-a', 'ep-gcp-plain')?.metadata.items ?? []).map((i) => i.key);
    expect(keys).not.toContain(METADATA_USER_DATA);
    expect(keys).not.toContain(METADATA_STARTUP_SCRIPT);
  });
});

describe('renderUserData', () => {
  it('refuses credentials the environment file cannot hold, naming the field and not the value', async () => {
    const programs = await bootPrograms();
    for (const password of ["it's", 'back\\slash', 'two\nlines']) {
      const render = () => renderUserData({ credentials: { username: 'u', password }, port: 3128, policy: { kind: 'gce-metadata' }, programs });
      expect(render).toThrow(ProvisioningError);
      expect(render).toThrow(/^credentials\.password: /);
      try {
        render();
      } catch (err) {
        expect((err as Error).message).not.toContain(password);
      }
    }
  });

  it('has every file and the units enabled on disk before the proxy starts: a VM killed right after its first boot gets its proxy back', async () => {
    const programs = await bootPrograms();
    for (const policy of [{ kind: 'gce-metadata' } as const, { kind: 'file', document: '{}' } as const]) {
      const doc = parse(renderUserData({ credentials: { username: 'u', password: 'p-12345678' }, port: 3128, policy, programs })) as { runcmd: string[][] };
      const units = policy.kind === 'gce-metadata' ? ['egress-proxy-policy.service', 'egress-proxy.service'] : ['egress-proxy.service'];
      // cloud-init runs these once per instance: what a kill loses from the page cache is never written again.
      expect(doc.runcmd).toEqual([['systemctl', 'daemon-reload'], ['systemctl', 'enable', ...units], ['sync'], ['systemctl', 'start', ...units]]);
    }
  });
});
