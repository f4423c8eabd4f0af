/**
 * The KVM proxy lifecycle against the real test host: libvirtd (qemu:///system, TCG guests)
 * behind the real sshd, pool `default`. Each test makes its own names and removes everything it
 * made (tagged or not) in afterEach.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { isLibvirtNotFound, type LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { createKvmHostPool, createKvmPoolMetrics, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { createLogger, type Logger } from '../../src/logging.ts';
import { ProvisioningError, type Instance, type InstanceSpec } from '../../src/providers/lifecycle.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { DEFAULT_DOMAIN_TEMPLATE, EGRESS_METADATA_URI, createKvmLifecycle, type KvmLifecycleOptions } from '../../src/providers/kvm/lifecycle.ts';
import { kvmHostConfigOf, kvmTestHost, removeDomainAndVolumes, type KvmTestHost } from '../support/kvm-host.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';
import { proxyEgressPolicy, type EgressGuards } from '../../src/egress/policy-config.ts';
import { createKvmProvider, kvmProviderSchema } from '../../src/providers/kvm/index.ts';
import { unescapeXml } from '../../src/providers/kvm/domain-xml.ts';
import { proxySecretOwner, SecretRegistry } from '../../src/secrets/secret-registry.ts';

const run = promisify(execFile);
const RUN_ID = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
let seq = 0;
const unique = (what: string): string => `egt-${RUN_ID}-${what}-${++seq}`;
const sig = (): AbortSignal => AbortSignal.timeout(30_000);

let testHost: KvmTestHost;
let host: KvmHostConfig;
let pool: KvmHostPool;
let baseVolume: string;
let logText = '';
let logger: Logger;
/** Called with every log line (a test may react to a step being reached). */
let onLogLine: ((line: string) => void) | undefined;
/** Domains and volumes the current test made or may have made. */
const domains = new Set<string>();
const volumes = new Set<string>();

function lib<T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> {
  return pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());
}

async function volumeExists(name: string): Promise<boolean> {
  return lib(async (c, s) => {
    const p = await c.storagePoolLookupByName(host.pool, s);
    try {
      await c.storageVolLookupByName(p, name, s);
      return true;
    } catch (err) {
      if (isLibvirtNotFound(err)) return false;
      throw err;
    }
  });
}

async function domainState(name: string): Promise<number | undefined> {
  return lib(async (c, s) => {
    try {
      return (await c.domainGetState(await c.domainLookupByName(name, s), s)).state;
    } catch (err) {
      if (isLibvirtNotFound(err)) return undefined;
      throw err;
    }
  });
}

async function removeVolume(name: string): Promise<void> {
  await lib(async (c, s) => {
    const p = await c.storagePoolLookupByName(host.pool, s);
    const v = await orUndefined(c.storageVolLookupByName(p, name, s));
    if (v) await c.storageVolDelete(v, 0, s);
  });
}

/** The process's secret registry, as the worker gives it to the provider (reconcile tells it each proxy's credentials). */
const secrets = new SecretRegistry();

function lifecycle(options: Partial<KvmLifecycleOptions> = {}, egressPolicy?: Parameters<typeof createKvmLifecycle>[0]['egressPolicy']) {
  return createKvmLifecycle({
    pool,
    hosts: [host],
    logger,
    secrets,
    options: { baseImageVolume: baseVolume, memoryMiB: 64, domainType: 'qemu', ...options },
    ...(egressPolicy ? { egressPolicy } : {}),
  });
}

/** The SMBIOS OEM strings of a domain as libvirt stores them (its live XML), unescaped. */
async function oemStrings(name: string): Promise<string[]> {
  const xml = await lib(async (c, s) => c.domainGetXmlDesc(await c.domainLookupByName(name, s), 0, s));
  const block = /<oemStrings>([\s\S]*?)<\/oemStrings>/.exec(xml)?.[1] ?? '';
  return [...block.matchAll(/<entry>([\s\S]*?)<\/entry>/g)].map((m) => unescapeXml(m[1] ?? ''));
}

const policyIn = async (name: string): Promise<unknown> => {
  const entry = (await oemStrings(name)).find((e) => e.startsWith('egress.proxy.policy='));
  return entry === undefined ? undefined : JSON.parse(entry.slice('egress.proxy.policy='.length));
};

function spec(name: string, fleet = 'fleet-a'): InstanceSpec {
  domains.add(name);
  volumes.add(`${name}.qcow2`);
  // The provider's configuration attaches a cloud-init seed by default (proxies.bootUserData).
  volumes.add(`${name}.seed.iso`);
  return { name, owner: { fleet, proxy: `proxy-${name}` }, credentials: { username: 'u-' + name, password: `pw-${RUN_ID}-secret` }, placement: host.name };
}

async function collect(it: AsyncIterable<Instance>): Promise<Instance[]> {
  const out: Instance[] = [];
  for await (const i of it) out.push(i);
  return out;
}

/** A domain defined directly, without our tag (someone else's guest in the same pool). */
async function defineUntagged(name: string): Promise<void> {
  domains.add(name);
  await lib((c, s) =>
    c.domainDefineXml(
      `<domain type='qemu'><name>${name}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>` +
        `<os><type arch='x86_64' machine='pc'>hvm</type></os><devices><graphics type='vnc' listen='127.0.0.1'/></devices></domain>`,
      0,
      s,
    ),
  );
}

beforeAll(async () => {
  testHost = await kvmTestHost();
  host = kvmHostConfigOf(testHost, 'kvm-test');
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logText += chunk.toString();
      onLogLine?.(chunk.toString());
      done();
    },
  });
  logger = createLogger({ level: 'debug', destination: sink });
  pool = createKvmHostPool({ logger, metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });
  // A tiny qcow2 base image, made in the pool's directory and picked up by a refresh.
  baseVolume = `${unique('base')}.qcow2`;
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', join(testHost.poolDir, baseVolume), '16M']);
  await lib(async (c, s) => c.storagePoolRefresh(await c.storagePoolLookupByName(host.pool, s), s));
});

afterEach(async () => {
  for (const name of domains) {
    await lib((c, s) => removeDomainAndVolumes(c, s, host.pool, name, []));
  }
  for (const v of volumes) await removeVolume(v);
  domains.clear();
  volumes.clear();
  onLogLine = undefined;
});

afterAll(async () => {
  if (pool) {
    if (baseVolume) await removeVolume(baseVolume);
    await pool.close();
  }
});

describe('KVM proxy lifecycle on the real test host', () => {
  it('ensure makes the volume and a tagged TCG domain and starts it', async () => {
    const lc = lifecycle({ domainType: 'qemu' });
    const s = spec(unique('px'));
    const first = await lc.ensureInstance(s, sig());
    expect(first).toMatchObject({ name: s.name, state: 'running', owner: s.owner, placement: host.name });
    expect(first.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(Number.isNaN(Date.parse(first.createdAt))).toBe(false);

    expect(await volumeExists(`${s.name}.qcow2`)).toBe(true);
    expect(await domainState(s.name)).toBe(1);
    const { xml, meta, vols } = await lib(async (c, sg) => {
      const dom = await c.domainLookupByName(s.name, sg);
      const p = await c.storagePoolLookupByName(host.pool, sg);
      return {
        xml: await c.domainGetXmlDesc(dom, 0, sg),
        meta: await c.domainGetMetadata(dom, { type: 2, uri: EGRESS_METADATA_URI, flags: 2 }, sg),
        vols: (await c.storagePoolListAllVolumes(p, sg)).map((v) => v.name).filter((n) => n.startsWith(s.name)),
      };
    });
    expect(xml).toMatch(/<domain type=['"]qemu['"]/);
    expect(xml).toContain(`${s.name}.qcow2`);
    expect(xml).toMatch(/<target dev=['"]vda['"] bus=['"]virtio['"]/);
    expect(xml).toContain('<interface');
    expect(meta).toContain('fleet="fleet-a"');
    expect(meta).toContain(`proxy="${s.owner.proxy}"`);
    expect(vols).toEqual([`${s.name}.qcow2`]);
    // The credentials reach the guest (SMBIOS OEM strings) but never a log line.
    expect(xml).toContain(s.credentials.password);
    expect(logText).not.toContain(s.credentials.password);
  });

  it('getInstance reports running, stopped and absent; ensure restarts a stopped tagged domain', async () => {
    const lc = lifecycle();
    const s = spec(unique('st'));
    expect(await lc.getInstance(s.name, host.name, sig())).toBeUndefined();
    const made = await lc.ensureInstance(s, sig());
    expect((await lc.getInstance(s.name, host.name, sig()))?.state).toBe('running');
    expect((await lc.getInstance(s.name, undefined, sig()))?.id).toBe(made.id);

    await lib(async (c, sg) => c.domainDestroy(await c.domainLookupByName(s.name, sg), 0, sg));
    const stopped = await lc.getInstance(s.name, host.name, sig());
    expect(stopped).toMatchObject({ state: 'stopped', createdAt: made.createdAt, owner: s.owner });
    expect(stopped?.endpoint).toBeUndefined();

    expect((await lc.ensureInstance(s, sig())).state).toBe('running');
    expect(await domainState(s.name)).toBe(1);
  });

  it('deleteInstance removes the domain and its volume, and is idempotent', async () => {
    const lc = lifecycle();
    const s = spec(unique('del'));
    await lc.ensureInstance(s, sig());
    await lc.deleteInstance(s.name, host.name, { owner: s.owner, nameIsOurs: true }, sig());
    expect(await domainState(s.name)).toBeUndefined();
    expect(await volumeExists(`${s.name}.qcow2`)).toBe(false);
    expect(await lc.getInstance(s.name, host.name, sig())).toBeUndefined();
    await lc.deleteInstance(s.name, host.name, { owner: s.owner, nameIsOurs: true }, sig());
    await lc.deleteInstance(s.name, undefined, { owner: s.owner, nameIsOurs: true }, sig());
  });

  it('a volume left by a crashed create is reused, not duplicated', async () => {
    const lc = lifecycle();
    const s = spec(unique('vol'));
    // The crash: the volume was made, the domain never defined.
    await lib(async (c, sg) => {
      const p = await c.storagePoolLookupByName(host.pool, sg);
      await c.storageVolCreateXml(
        p,
        `<volume><name>${s.name}.qcow2</name><capacity unit='M'>16</capacity><target><format type='qcow2'/></target></volume>`,
        0,
        sg,
      );
    });
    const made = await lc.ensureInstance(s, sig());
    expect(made.state).toBe('running');
    const vols = await lib(async (c, sg) =>
      (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(host.pool, sg), sg)).map((v) => v.name).filter((n) => n.startsWith(s.name)),
    );
    expect(vols).toEqual([`${s.name}.qcow2`]);
  });

  it('a name taken by an untagged domain is a ProvisioningError and nothing is made', async () => {
    const lc = lifecycle();
    const name = unique('clash');
    await defineUntagged(name);
    const s = spec(name);
    const err = await lc.ensureInstance(s, sig()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as ProvisioningError).retryable).toBe(false);
    expect((err as Error).message).toContain(name);
    expect(await domainState(name)).toBe(5);
    expect(await volumeExists(`${name}.qcow2`)).toBe(false);
    expect(
      await lib(async (c, sg) =>
        c.domainGetMetadata(await c.domainLookupByName(name, sg), { type: 2, uri: EGRESS_METADATA_URI, flags: 2 }, sg).catch((e: unknown) => e),
      ),
    ).toSatisfy(isLibvirtNotFound);
  });

  it("a name that is another proxy's instance is a ProvisioningError and that instance is kept", async () => {
    const lc = lifecycle();
    const s = spec(unique('taken'));
    const made = await lc.ensureInstance(s, sig());
    const err = await lc.ensureInstance({ ...s, owner: { fleet: 'fleet-a', proxy: 'someone-else' } }, sig()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((await lc.getInstance(s.name, host.name, sig()))?.id).toBe(made.id);
  });

  it('an invalid domain template is a ProvisioningError and leaves no volume', async () => {
    const lc = lifecycle({ domainTemplate: `<domain type='qemu'><name>{{name}}</name><metadata>{{metadata}}</metadata><devices>{{disk}}</devices>` });
    const s = spec(unique('bad'));
    const err = await lc.ensureInstance(s, sig()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect(await domainState(s.name)).toBeUndefined();
    expect(await volumeExists(`${s.name}.qcow2`)).toBe(false);
  });

  it('a template libvirt cannot parse on the credentials line fails without the password in the error or the log', async () => {
    // libvirt quotes the offending line in its parse error: here, the line holding the OEM strings.
    const lc = lifecycle({ domainTemplate: DEFAULT_DOMAIN_TEMPLATE.replace('{{sysinfo}}', `{{sysinfo}}<broken a='&'/>`) });
    const s = spec(unique('leak'));
    secrets.setCredentials(proxySecretOwner(s.owner.proxy), s.credentials);
    const err = await lc.ensureInstance(s, sig()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toMatch(/defining domain .*xmlParse/s);
    expect((err as Error).message).toContain('egress.proxy.password=[redacted]');
    const everything = [(err as Error).message, JSON.stringify(err), String((err as Error).cause), JSON.stringify((err as Error).cause), logText].join('\n');
    expect(everything).not.toContain(s.credentials.password);
    expect(await volumeExists(`${s.name}.qcow2`)).toBe(false);
  });

  it('a missing base image volume without an image file is a ProvisioningError', async () => {
    const lc = lifecycle({ baseImageVolume: `${unique('nobase')}.qcow2` });
    const s = spec(unique('nb'));
    await expect(lc.ensureInstance(s, sig())).rejects.toBeInstanceOf(ProvisioningError);
    expect(await domainState(s.name)).toBeUndefined();
  });

  it('uploads the local base image file when the pool lacks the base volume', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'egress-kvm-base-'));
    const file = join(dir, 'base.qcow2');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', file, '32M']);
    const base = `${unique('upl')}.qcow2`;
    volumes.add(base);
    try {
      const lc = lifecycle({ baseImageVolume: base, baseImageFile: file });
      const s = spec(unique('up'));
      expect((await lc.ensureInstance(s, sig())).state).toBe('running');
      expect(await volumeExists(base)).toBe(true);
      const info = await lib(async (c, sg) =>
        c.storageVolGetInfo(await c.storageVolLookupByName(await c.storagePoolLookupByName(host.pool, sg), base, sg), sg),
      );
      expect(info.capacity).toBe(32 * 1024 * 1024);
      // Delete the instance before its base (the base outlives proxies).
      await lc.deleteInstance(s.name, host.name, { owner: s.owner, nameIsOurs: true }, sig());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an ensure cut off between define and start is finished by the next ensure: one domain, one volume', async () => {
    const lc = lifecycle();
    const s = spec(unique('cut'));
    const job = new AbortController();
    // The worker's deadline strikes right after the define (the intent) was recorded.
    onLogLine = (line) => {
      if (line.includes('proxy domain defined') && line.includes(s.name)) job.abort(new Error('job deadline'));
    };
    await expect(lc.ensureInstance(s, job.signal)).rejects.toThrow();
    onLogLine = undefined;
    expect(await domainState(s.name)).toBe(5);
    const stopped = await lc.getInstance(s.name, host.name, sig());
    expect(stopped).toMatchObject({ state: 'stopped', owner: s.owner });

    const done = await lc.ensureInstance(s, sig());
    expect(done).toMatchObject({ id: stopped?.id, createdAt: stopped?.createdAt, state: 'running' });
    const vols = await lib(async (c, sg) =>
      (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(host.pool, sg), sg)).map((v) => v.name).filter((n) => n.startsWith(s.name)),
    );
    expect(vols).toEqual([`${s.name}.qcow2`]);
  });

  it('two workers ensuring the same instance at once make one domain and one volume', async () => {
    const other = createKvmHostPool({ logger, metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });
    try {
      const a = lifecycle();
      const b = createKvmLifecycle({ pool: other, hosts: [host], logger, options: { baseImageVolume: baseVolume, memoryMiB: 64, domainType: 'qemu' } });
      const s = spec(unique('race'));
      const [x, y] = await Promise.all([a.ensureInstance(s, sig()), b.ensureInstance(s, sig())]);
      expect(y.id).toBe(x.id);
      expect([x.state, y.state]).toEqual(['running', 'running']);
      const { doms, vols } = await lib(async (c, sg) => ({
        doms: (await c.listAllDomains(0, sg)).map((d) => d.name).filter((n) => n === s.name),
        vols: (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(host.pool, sg), sg)).map((v) => v.name).filter((n) => n.startsWith(s.name)),
      }));
      expect(doms).toEqual([s.name]);
      expect(vols).toEqual([`${s.name}.qcow2`]);
    } finally {
      await other.close();
    }
  });

  it('owner names with XML specials survive the tag round trip through libvirt', async () => {
    const lc = lifecycle();
    const name = unique('esc');
    const s = { ...spec(name, `fleet&<"'>x`), owner: { fleet: `fleet&<"'>x`, proxy: `p&amp;"q` } };
    await lc.ensureInstance(s, sig());
    expect((await lc.getInstance(name, host.name, sig()))?.owner).toEqual(s.owner);
    expect((await collect(lc.listInstances(s.owner.fleet, sig()))).map((i) => i.owner)).toEqual([s.owner]);
  });

  it('reports the endpoint from the interface addresses (test driver, which fabricates a lease) and deletes on a driver without the NVRAM flag', async () => {
    // The QEMU test host has no libvirt network; the daemon's test:///default driver reports addresses.
    const td: KvmHostConfig = { ...host, name: 'kvm-test-driver', uri: 'test:///default', pool: 'default-pool' };
    const tdBase = `${unique('tdbase')}.qcow2`;
    const tdCall = <T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> =>
      pool.call(td, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());
    await tdCall(async (c, s) => {
      const p = await c.storagePoolLookupByName(td.pool, s);
      await c.storageVolCreateXml(p, `<volume><name>${tdBase}</name><capacity unit='M'>16</capacity><target><format type='qcow2'/></target></volume>`, 0, s);
    });
    const name = unique('ep');
    try {
      const lc = createKvmLifecycle({
        pool,
        hosts: [td],
        logger,
        options: {
          baseImageVolume: tdBase,
          network: 'default',
          proxyPort: 8888,
          domainTemplate: `<domain type='test'><name>{{name}}</name><metadata>{{metadata}}</metadata><memory unit='MiB'>64</memory><os><type>hvm</type></os><devices>{{disk}}{{interface}}</devices></domain>`,
        },
      });
      const made = await lc.ensureInstance({ name, owner: { fleet: 'fleet-td', proxy: 'p1' }, credentials: { username: 'u', password: 'pw' } }, sig());
      expect(made).toMatchObject({ state: 'running', placement: td.name, endpoint: { port: 8888 } });
      expect(made.endpoint?.host).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      await lc.deleteInstance(name, undefined, { owner: { fleet: 'fleet-td', proxy: 'p1' }, nameIsOurs: true }, sig());
      expect(await lc.getInstance(name, undefined, sig())).toBeUndefined();
      const left = await tdCall(async (c, s) => (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(td.pool, s), s)).map((v) => v.name));
      expect(left).not.toContain(`${name}.qcow2`);
    } finally {
      await tdCall(async (c, s) => {
        const dom = await c.domainLookupByName(name, s).catch(() => undefined);
        if (dom) {
          await c.domainDestroy(dom, 0, s).catch(() => undefined);
          await c.domainUndefine(dom, 0, s).catch(() => undefined);
        }
        const p = await c.storagePoolLookupByName(td.pool, s);
        for (const v of [`${name}.qcow2`, tdBase]) {
          const vol = await c.storageVolLookupByName(p, v, s).catch(() => undefined);
          if (vol) await c.storageVolDelete(vol, 0, s);
        }
      });
    }
  });

  it('an unknown placement is a ProvisioningError', async () => {
    const lc = lifecycle();
    await expect(lc.ensureInstance({ ...spec(unique('np')), placement: 'nowhere' }, sig())).rejects.toBeInstanceOf(ProvisioningError);
  });

  describe('egress policy', () => {
    // Guarded names with XML specials (a listener's host is whatever the process was told), and the echo.
    const guards: EgressGuards = {
      guarded: [
        { host: '127.0.0.1', port: 46379, role: 'redis' },
        { host: `api&<"'>.example`, port: 8080, role: 'api' },
      ],
      echo: { host: `api&<"'>.example`, port: 8080, path: '/v1/echo?a=1&b=<2>' },
    };

    it('the provider defines the domain with its proxies.egressPolicy and the guarded listeners as the OEM string egress.proxy.policy, XML specials intact, and QEMU boots it', async () => {
      const config = kvmProviderSchema.parse({
        name: 'kvm',
        type: 'kvm',
        hosts: [host],
        proxies: {
          baseImageVolume: baseVolume,
          memoryMiB: 64,
          domainType: 'qemu',
          egressPolicy: { allow: ['10.20.0.0/16'], deny: ['192.0.2.0/24', 'fd00::/8'] },
        },
      });
      const provider = createKvmProvider(config, { logger, registry: new Registry(), dataDir: '/nonexistent', egress: guards });
      const s = spec(unique('pol'));
      try {
        expect((await provider.lifecycle?.ensureInstance(s, sig()))?.state).toBe('running');
      } finally {
        await provider.close();
      }
      expect(await domainState(s.name)).toBe(1);
      const expected = proxyEgressPolicy(config.proxies?.egressPolicy, guards);
      expect(await policyIn(s.name)).toEqual(expected);
      expect(expected).toMatchObject({ allow: ['10.20.0.0/16'], echo: { host: `api&<"'>.example`, path: '/v1/echo?a=1&b=<2>' } });
      expect(await oemStrings(s.name)).toEqual([
        `egress.proxy.username=${s.credentials.username}`,
        `egress.proxy.password=${s.credentials.password}`,
        `egress.proxy.policy=${JSON.stringify(expected)}`,
      ]);
      // What QEMU was given for the guest's SMBIOS type 11 table (the test host is this machine): the
      // whole document as one string, its commas doubled as QEMU's option syntax wants.
      const pid = (await readFile(`/run/libvirt/qemu/${s.name}.pid`, 'utf8')).trim();
      const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
      const type11 = argv.filter((arg, i) => argv[i - 1] === '-smbios' && arg.startsWith('type=11,'));
      expect(type11).toHaveLength(1);
      expect(type11[0]).toContain(`,value=egress.proxy.policy=${JSON.stringify(expected).replaceAll(',', ',,')}`);
    });

    it('an unchanged policy leaves the domain as it is; a changed one applies to domains defined after it, not to running ones', async () => {
      const a = proxyEgressPolicy({ allow: ['10.20.0.0/16'], deny: [] }, guards);
      const b = proxyEgressPolicy({ allow: ['10.20.0.0/16', '172.16.5.0/24'], deny: [] }, guards);
      const s = spec(unique('chg'));
      const first = await lifecycle({}, a).ensureInstance(s, sig());
      const xml = await lib(async (c, sg) => c.domainGetXmlDesc(await c.domainLookupByName(s.name, sg), 0, sg));

      // A restarted worker building the same document again: nothing changes.
      const same = await lifecycle({}, proxyEgressPolicy({ allow: ['10.20.0.0/16'], deny: [] }, guards)).ensureInstance(s, sig());
      expect(same).toMatchObject({ id: first.id, createdAt: first.createdAt, state: 'running' });
      expect(await lib(async (c, sg) => c.domainGetXmlDesc(await c.domainLookupByName(s.name, sg), 0, sg))).toBe(xml);

      // A new policy: the running domain keeps the one it was defined with (SMBIOS cannot change)...
      const lcB = lifecycle({}, b);
      expect(await lcB.ensureInstance(s, sig())).toMatchObject({ id: first.id, state: 'running' });
      expect(await policyIn(s.name)).toEqual(a);
      // ...and a domain defined from now on (a new or replaced proxy) gets the new one.
      const t = spec(unique('chg'));
      await lcB.ensureInstance(t, sig());
      expect(await policyIn(t.name)).toEqual(b);
    });

    it('the largest policy the configuration accepts (256 allowed and 256 denied IPv6 ranges) still defines and boots', async () => {
      const v6 = (i: number, tag: string): string => `2001:db8:${tag}:${i.toString(16)}:ffff:ffff:ffff:ffff/128`;
      const config = kvmProviderSchema.parse({
        name: 'kvm',
        type: 'kvm',
        hosts: [host],
        proxies: {
          baseImageVolume: baseVolume,
          egressPolicy: { allow: Array.from({ length: 256 }, (_, i) => v6(i, 'aaaa')), deny: Array.from({ length: 256 }, (_, i) => v6(i, 'bbbb')) },
        },
      });
      const big = proxyEgressPolicy(config.proxies?.egressPolicy, guards);
      expect(JSON.stringify(big).length).toBeGreaterThan(20_000);
      const s = spec(unique('big'));
      expect((await lifecycle({}, big).ensureInstance(s, sig())).state).toBe('running');
      expect(await domainState(s.name)).toBe(1);
      expect(await policyIn(s.name)).toEqual(big);
    });
  });
});
