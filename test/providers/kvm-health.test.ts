import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { readFile } from 'node:fs/promises';
import { runCheck } from '../../src/checks/run-check.ts';
import { silentLogger } from '../../src/logging.ts';
import { createRegistry } from '../../src/metrics/registry.ts';
import { createKvmProvider, type KvmProvider } from '../../src/providers/kvm/index.ts';
import { kvmHostSchema, type KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { FakeLibvirtServer } from '../fakes/libvirt/index.ts';
import { closedPort, FakeSshServer } from '../fakes/ssh/index.ts';
import { kvmHostConfigOf, kvmTestHost, type KvmTestHost } from '../support/kvm-host.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/temp-dirs.ts';

let host: KvmTestHost;
const providers: KvmProvider[] = [];
const registries = new Map<KvmProvider, Registry>();
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  host = await kvmTestHost();
});
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});
afterAll(async () => {
  for (const c of closers.splice(0)) await c();
});

function realHost(name: string, overrides: Partial<KvmHostConfig> = {}): KvmHostConfig {
  return kvmHostSchema.parse(kvmHostConfigOf(host, name, overrides));
}

function provider(hosts: KvmHostConfig[]): KvmProvider {
  const registry = createRegistry();
  const p = createKvmProvider({ name: 'kvm', type: 'kvm', hosts, idleTimeout: 60_000 }, { logger: silentLogger(), registry, dataDir: tmpdir() });
  providers.push(p);
  registries.set(p, registry);
  return p;
}

/** Successful dials per host, from the pool's own metric. */
async function okDials(p: KvmProvider): Promise<Record<string, number>> {
  const metric = await registries.get(p)?.getSingleMetric('proxy_operator_kvm_dials_total')?.get();
  const out: Record<string, number> = {};
  for (const v of metric?.values ?? []) if (v.labels.outcome === 'ok') out[String(v.labels.host)] = v.value;
  return out;
}

describe('KVM health check against the real libvirtd over the real sshd', () => {
  test('a healthy host is Ok with version, hostname, pool state and free bytes', async () => {
    const p = provider([realHost('real')]);
    const [r] = await p.check(AbortSignal.timeout(15_000));
    expect(r).toMatchObject({ target: 'real', ready: true, reason: 'Ok' });
    expect(r?.details).toMatchObject({
      address: `${host.ssh.host}:${host.ssh.port}`,
      user: 'root',
      pool: host.pool,
      poolState: 'running',
      libvirtVersion: expect.stringMatching(/^\d+\.\d+\.\d+$/),
      hostname: expect.any(String),
      availableBytes: expect.stringMatching(/^\d+$/),
    });
    expect(r?.message).toMatch(/^libvirt \d+\.\d+\.\d+ on .+, pool default running, [\d.]+ GiB free$/);
  });

  test('PoolInactive and PoolNotFound come from the host’s inactive and missing pools, over one connection', async () => {
    const inactive = realHost('inactive', { pool: host.inactivePool });
    const missing = realHost('missing', { pool: 'no-such-pool' });
    const p = provider([inactive, missing]);
    for (let round = 0; round < 2; round++) {
      const results = await p.check(AbortSignal.timeout(15_000));
      expect(results[0]).toMatchObject({
        target: 'inactive',
        ready: false,
        reason: 'PoolInactive',
        message: `storage pool "${host.inactivePool}" on ${results[0]?.details.hostname} is inactive`,
      });
      expect(results[0]?.details.poolState).toBe('inactive');
      expect(results[1]).toMatchObject({ target: 'missing', ready: false, reason: 'PoolNotFound' });
      expect(results[1]?.message).toMatch(/^storage pool "no-such-pool" not found on /);
    }
    // The verdicts never dropped the connections: both hosts are still connected after two rounds.
    expect(await okDials(p)).toEqual({ inactive: 1, missing: 1 });
  });

  test('dial stages map to reasons: wrong known_hosts, missing key, closed port, refused channel', async () => {
    const dir = await tempDir('egress-kvm-bad-');
    const wrongKnownHosts = join(dir, 'known_hosts');
    const other = new FakeSshServer();
    await writeFile(wrongKnownHosts, `[${host.ssh.host}]:${host.ssh.port} ${other.hostKey.publicKey}\n`);
    const refusing = new FakeSshServer({ streamlocal: { kind: 'reject' } });
    await refusing.listen();
    closers.push(() => refusing.close());
    const refusingMaterial = await refusing.writeMaterial();
    const p = provider([
      realHost('wrong-hostkey', { knownHostsFile: wrongKnownHosts }),
      realHost('no-key', { privateKeyFile: join(dir, 'missing_id_ed25519') }),
      realHost('closed', { port: await closedPort() }),
      realHost('no-channel', { port: refusing.port, privateKeyFile: refusingMaterial.keyFile, knownHostsFile: refusingMaterial.knownHostsFile }),
    ]);
    const results = await p.check(AbortSignal.timeout(15_000));
    expect(results.map((r) => [r.target, r.ready, r.reason])).toEqual([
      ['wrong-hostkey', false, 'SSHHandshakeFailed'],
      ['no-key', false, 'SSHMaterialUnavailable'],
      ['closed', false, 'Unreachable'],
      ['no-channel', false, 'LibvirtConnectFailed'],
    ]);
    expect(results[1]?.message).toContain('missing_id_ed25519');
  });

  test('a daemon error reply is DaemonError, and the connection survives it', async () => {
    const fake = new FakeLibvirtServer();
    const ssh = new FakeSshServer({ streamlocal: { kind: 'libvirt', server: fake } });
    await ssh.listen();
    closers.push(() => ssh.close());
    const m = await ssh.writeMaterial();
    const p = provider([realHost('fake', { port: ssh.port, privateKeyFile: m.keyFile, knownHostsFile: m.knownHostsFile })]);
    expect((await p.check(AbortSignal.timeout(10_000)))[0]?.reason).toBe('Ok');
    fake.faults.failNext('connect_get_hostname', 1, 10, 'internal error: the daemon is unwell');
    const [bad] = await p.check(AbortSignal.timeout(10_000));
    expect(bad).toMatchObject({ ready: false, reason: 'DaemonError' });
    expect(bad?.message).toContain('the daemon is unwell');
    expect((await p.check(AbortSignal.timeout(10_000)))[0]?.reason).toBe('Ok');
    expect(fake.sessions.size).toBe(1);
  });

  test('a frozen libvirtd gives Timeout while the other host in the round reports Ready; after SIGCONT the same connection answers', async () => {
    const fake = new FakeLibvirtServer();
    const ssh = new FakeSshServer({ streamlocal: { kind: 'libvirt', server: fake } });
    await ssh.listen();
    closers.push(() => ssh.close());
    const m = await ssh.writeMaterial();
    const p = provider([realHost('frozen'), realHost('healthy', { port: ssh.port, privateKeyFile: m.keyFile, knownHostsFile: m.knownHostsFile })]);
    // Warm both connections, so the freeze hits an established one.
    expect((await p.check(AbortSignal.timeout(15_000))).map((r) => r.reason)).toEqual(['Ok', 'Ok']);
    const pid = Number((await readFile(host.libvirtdPidFile, 'utf8')).trim());
    process.kill(pid, 'SIGSTOP');
    try {
      // The round ends by the test's hand, once the healthy host has answered in it and the frozen
      // one's probe is still waiting (no clock: on a loaded machine the healthy answer may take long).
      const round = new AbortController();
      const served = fake.requests.length;
      const checking = runCheck(p, round.signal);
      const stats = (host: string) => p.pool.stats().find((s) => s.host === host);
      await waitFor(
        'the healthy host to answer while the frozen one waits',
        () => fake.requests.length > served && stats('healthy')?.active === 0 && stats('frozen')?.active === 1,
      );
      round.abort(new Error('the test ended the round'));
      const results = await checking;
      expect(results.map((r) => [r.target, r.ready, r.reason])).toEqual([
        ['frozen', false, 'Timeout'],
        ['healthy', true, 'Ok'],
      ]);
      // The abandoned probe is still waiting: the next probe of that host is refused at once.
      const busy = await runCheck(p, AbortSignal.timeout(5_000));
      expect(busy[0]).toMatchObject({ target: 'frozen', reason: 'Timeout' });
      expect(busy[0]?.message).toMatch(/earlier probe is still waiting/);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // Thawed, the daemon answers the abandoned probe; the connection was never dropped.
    await waitFor('the abandoned probe to finish', () => p.pool.stats().find((s) => s.host === 'frozen')?.abandonedProbe === false);
    expect(p.pool.stats().find((s) => s.host === 'frozen')?.connected).toBe(true);
    const after = await p.check(AbortSignal.timeout(15_000));
    expect(after[0]).toMatchObject({ target: 'frozen', reason: 'Ok' });
    expect(await okDials(p)).toEqual({ frozen: 1, healthy: 1 });
  });
});
