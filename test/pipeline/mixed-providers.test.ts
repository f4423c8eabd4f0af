import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { parseConfigDocument } from '../../src/config/file.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { silentLogger } from '../../src/logging.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { FakeSshServer } from '../fakes/ssh/index.ts';
import { testConfig } from '../support/config.ts';
import { kvmHostConfigOf, kvmTestHost } from '../support/kvm-host.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/temp-dirs.ts';

// Scheduler, worker, publisher and API in one process, with every provider type: local,
// kubernetes and gcp against their fakes through the real client libraries, and two KVM hosts
// on the real libvirtd over the real sshd, one of them broken (its known_hosts holds another key).
describe('provider health end to end with a mixed configuration', () => {
  let roles: RunningRoles;
  let api: string;
  let kube: FakeKubeApiserver;
  let compute: FakeCompute;
  let brokenKnownHosts: string;
  let goodKnownHosts: string;

  beforeAll(async () => {
    const host = await kvmTestHost();
    kube = await startFakeKubeApiserver({ tokens: { 'kube-token': 'system:serviceaccount:egress:operator' } });
    compute = await startFakeCompute({ project: 'egress-test', tokens: ['gcp-token'] });
    const dir = await tempDir('egress-mixed-');
    await writeFile(join(dir, 'kube-token'), 'kube-token\n');
    await writeFile(join(dir, 'gcp-token'), 'gcp-token\n');
    goodKnownHosts = host.ssh.knownHostsFile;
    brokenKnownHosts = join(dir, 'known_hosts-broken');
    await writeFile(brokenKnownHosts, `[${host.ssh.host}]:${host.ssh.port} ${new FakeSshServer().hostKey.publicKey}\n`);
    const kvmHost = (name: string, knownHostsFile: string) => kvmHostConfigOf(host, name, { knownHostsFile });
    const { providers } = parseConfigDocument(
      {
        providers: [
          { name: 'local', type: 'local' },
          { name: 'k8s', type: 'kubernetes', server: kube.url, tokenFile: join(dir, 'kube-token'), skipTLSVerify: true },
          {
            name: 'gce',
            type: 'gcp',
            project: 'egress-test',
            accessTokenFile: join(dir, 'gcp-token'),
            apiEndpoint: '127.0.0.1',
            port: compute.port,
            protocol: 'http',
          },
          { name: 'kvm-home', type: 'kvm', hosts: [kvmHost('good', goodKnownHosts), kvmHost('broken', brokenKnownHosts)] },
        ],
      },
      'test',
    );
    roles = await runRoles(testConfig({ providers, intervalMs: 60_000, timeoutMs: 10_000 }), ['publisher', 'worker', 'scheduler', 'api'], silentLogger());
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles?.close();
    await kube?.close();
    await compute?.close();
  });

  const all = async (): Promise<ProviderHealth[]> => ((await (await fetch(`${api}/v1/providerhealths`)).json()) as { items: ProviderHealth[] }).items;
  const target = (items: ProviderHealth[], provider: string, name: string) =>
    items.find((p) => p.name === provider)?.status.targets.find((t) => t.name === name);

  test('the first round publishes every provider, with the broken host’s reason, and the gauges follow', async () => {
    const items = await waitFor('all four providers published', async () => {
      const got = await all();
      return got.length === 4 ? got : undefined;
    });
    expect(items.map((p) => [p.name, p.status.ready])).toEqual([
      ['gce', true],
      ['k8s', true],
      ['kvm-home', false],
      ['local', true],
    ]);
    expect(target(items, 'kvm-home', 'good')).toMatchObject({ ready: true, reason: 'Ok' });
    expect(target(items, 'kvm-home', 'broken')).toMatchObject({ ready: false, reason: 'SSHHandshakeFailed' });
    expect(target(items, 'k8s', 'apiserver')).toMatchObject({ ready: true, reason: 'Ok' });
    expect(target(items, 'gce', 'compute')).toMatchObject({ ready: true, reason: 'Ok' });

    const metrics = await (await fetch(`${api}/metrics`)).text();
    for (const [labels, up] of [
      ['provider="local",target="localhost"', 1],
      ['provider="k8s",target="apiserver"', 1],
      ['provider="gce",target="compute"', 1],
      ['provider="kvm-home",target="good"', 1],
      ['provider="kvm-home",target="broken"', 0],
    ] as const) {
      expect(metrics).toContain(`proxy_operator_provider_target_up{${labels}} ${up}`);
      expect(metrics).toMatch(new RegExp(`proxy_operator_provider_check_duration_seconds\\{${labels}\\} \\d`));
      expect(metrics).toMatch(new RegExp(`proxy_operator_provider_check_timestamp_seconds\\{${labels}\\} \\d{10}`));
    }
  });

  test('repairing the broken host moves only its target’s lastTransitionTime', async () => {
    const before = await all();
    const goodBefore = target(before, 'kvm-home', 'good');
    const brokenBefore = target(before, 'kvm-home', 'broken');
    const kvmBefore = before.find((p) => p.name === 'kvm-home');
    // The repair: the right host key in the file the configuration names (read at every dial).
    await writeFile(brokenKnownHosts, await import('node:fs/promises').then((fs) => fs.readFile(goodKnownHosts, 'utf8')));
    const check = await fetch(`${api}/v1/providers/kvm-home/checks?wait=true`, { method: 'POST' });
    expect(check.status).toBe(200);
    // The ad-hoc check started after the repair: it sees the fixed host, never an older running check's verdict.
    const { result } = (await check.json()) as { result: { targets: { target: string; reason: string }[] } };
    expect(result.targets.find((t) => t.target === 'broken')?.reason).toBe('Ok');
    const after = await waitFor('the repair to be published', async () => {
      const got = await all();
      return target(got, 'kvm-home', 'broken')?.ready ? got : undefined;
    });
    const goodAfter = target(after, 'kvm-home', 'good');
    const brokenAfter = target(after, 'kvm-home', 'broken');
    expect(brokenAfter).toMatchObject({ ready: true, reason: 'Ok' });
    expect(brokenAfter?.lastTransitionTime).not.toBe(brokenBefore?.lastTransitionTime);
    expect(goodAfter?.lastTransitionTime).toBe(goodBefore?.lastTransitionTime);
    expect(goodAfter?.lastCheckTime).not.toBe(goodBefore?.lastCheckTime);
    // The provider as a whole flipped to ready, so its own transition time moved too.
    const kvmAfter = after.find((p) => p.name === 'kvm-home');
    expect(kvmAfter?.status.ready).toBe(true);
    expect(kvmAfter?.status.lastTransitionTime).not.toBe(kvmBefore?.status.lastTransitionTime);
    // Other providers did not flip.
    for (const name of ['local', 'k8s', 'gce']) {
      expect(after.find((p) => p.name === name)?.status.lastTransitionTime).toBe(before.find((p) => p.name === name)?.status.lastTransitionTime);
    }
    expect(await (await fetch(`${api}/metrics`)).text()).toContain('proxy_operator_provider_target_up{provider="kvm-home",target="broken"} 1');
  });
});
