/**
 * The cloud-init seed of KVM proxies against the real test host (libvirtd behind sshd, pool
 * `default`): the volume is uploaded with STORAGE_VOL_UPLOAD and holds exactly the seed image, the
 * defined domain carries it as a read-only disk beside the overlay, and it goes with the domain.
 * Each test removes what it made.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { isLibvirtNotFound, type LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { createKvmHostPool, createKvmPoolMetrics, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { createLogger, type Logger } from '../../src/logging.ts';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { ProvisioningError, type InstanceSpec } from '../../src/providers/lifecycle.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { createKvmLifecycle, type KvmLifecycleOptions } from '../../src/providers/kvm/lifecycle.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';
import { seedImage, writeSeed } from '../../src/providers/kvm/seed.ts';
import { kvmProviderSchema } from '../../src/providers/kvm/index.ts';
import { kvmHostConfigOf, kvmTestHost, removeDomainAndVolumes, type KvmTestHost } from '../support/kvm-host.ts';
import { readIso9660 } from '../support/iso9660-reader.ts';

const run = promisify(execFile);
const RUN_ID = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
let seq = 0;
const unique = (what: string): string => `egs-${RUN_ID}-${what}-${++seq}`;
const sig = (): AbortSignal => AbortSignal.timeout(30_000);
const PASSWORD = `pw-${RUN_ID}-seed-secret`;

let testHost: KvmTestHost;
let host: KvmHostConfig;
let pool: KvmHostPool;
let baseVolume: string;
let logText = '';
let logger: Logger;
const names = new Set<string>();

function lib<T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> {
  return pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());
}

async function poolVolumes(prefix: string): Promise<string[]> {
  return lib(async (c, s) =>
    (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(host.pool, s), s))
      .map((v) => v.name)
      .filter((n) => n.startsWith(prefix))
      .sort(),
  );
}

function lifecycle(options: Partial<KvmLifecycleOptions> = {}) {
  return createKvmLifecycle({
    pool,
    hosts: [host],
    logger,
    options: { baseImageVolume: baseVolume, memoryMiB: 64, domainType: 'qemu', bootUserData: true, ...options },
    egressPolicy: proxyEgressPolicy(undefined, undefined),
  });
}

function spec(name: string): InstanceSpec {
  names.add(name);
  return { name, owner: { fleet: 'fleet-s', proxy: `proxy-${name}` }, credentials: { username: `u-${name}`, password: PASSWORD }, placement: host.name };
}

beforeAll(async () => {
  testHost = await kvmTestHost();
  host = kvmHostConfigOf(testHost, 'kvm-test');
  logger = createLogger({ level: 'debug', destination: new Writable({ write: (c: Buffer, _e, done) => ((logText += c.toString()), done()) }) });
  pool = createKvmHostPool({ logger, metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });
  baseVolume = `${unique('base')}.qcow2`;
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', join(testHost.poolDir, baseVolume), '16M']);
  await lib(async (c, s) => c.storagePoolRefresh(await c.storagePoolLookupByName(host.pool, s), s));
});

afterEach(async () => {
  for (const name of names) {
    await lib((c, s) => removeDomainAndVolumes(c, s, host.pool, name));
  }
  names.clear();
});

afterAll(async () => {
  if (!pool) return;
  await lib(async (c, s) => {
    const vol = await orUndefined(c.storageVolLookupByName(await c.storagePoolLookupByName(host.pool, s), baseVolume, s));
    if (vol) await c.storageVolDelete(vol, 0, s);
  });
  await pool.close();
});

describe('KVM cloud-init seed on the real test host', () => {
  it('uploads the seed volume beside the overlay, attaches it read-only, and deletes it with the domain', async () => {
    const lc = lifecycle();
    const s = spec(unique('px'));
    await lc.ensureInstance(s, sig());

    expect(await poolVolumes(s.name)).toEqual([`${s.name}.qcow2`, `${s.name}.seed.iso`]);
    // The bytes in the pool are the seed image for this proxy, and readable as one.
    const onDisk = await readFile(join(testHost.poolDir, `${s.name}.seed.iso`));
    expect(onDisk.equals(await seedImage(s, 3128, JSON.stringify(proxyEgressPolicy(undefined, undefined))))).toBe(true);
    const iso = readIso9660(onDisk);
    expect(iso.label).toBe('CIDATA');
    expect(iso.files.get('user-data')?.toString()).toContain(`PROXY_PASSWORD='${PASSWORD}'`);

    const xml = await lib(async (c, sg) => c.domainGetXmlDesc(await c.domainLookupByName(s.name, sg), 0, sg));
    const disks = [...xml.matchAll(/<disk\b[\s\S]*?<\/disk>/g)].map((m) => m[0]);
    expect(disks).toHaveLength(2);
    expect(disks[0]).toContain(`${s.name}.qcow2`);
    expect(disks[0]).toMatch(/<target dev=['"]vda['"]/);
    expect(disks[1]).toMatch(new RegExp(`<source pool=['"]${host.pool}['"] volume=['"]${s.name}\\.seed\\.iso['"]`));
    expect(disks[1]).toMatch(/<driver name=['"]qemu['"] type=['"]raw['"]/);
    expect(disks[1]).toMatch(/<target dev=['"]vdb['"] bus=['"]virtio['"]/);
    expect(disks[1]).toContain('<readonly/>');
    expect(await lib(async (c, sg) => (await c.domainGetState(await c.domainLookupByName(s.name, sg), sg)).state)).toBe(1);

    await lc.deleteInstance(s.name, host.name, { owner: s.owner, nameIsOurs: true }, sig());
    expect(await poolVolumes(s.name)).toEqual([]);
    expect(logText).not.toContain(PASSWORD);
  });

  it('a seed left by a create cut off before the define is rewritten by the next ensure, and removed by a delete', async () => {
    const s = spec(unique('crash'));
    const seedName = `${s.name}.seed.iso`;
    // What a crash after an interrupted upload leaves: a seed volume of the right size with the wrong bytes.
    const size = (await seedImage(s, 3128, JSON.stringify(proxyEgressPolicy(undefined, undefined)))).length;
    await lib(async (c, sg) =>
      c.storageVolCreateXml(
        await c.storagePoolLookupByName(host.pool, sg),
        `<volume><name>${seedName}</name><capacity unit='bytes'>${size}</capacity><target><format type='raw'/></target></volume>`,
        0,
        sg,
      ),
    );
    await lifecycle().ensureInstance(s, sig());
    const onDisk = await readFile(join(testHost.poolDir, seedName));
    expect(readIso9660(onDisk).label).toBe('CIDATA');

    // A leftover with no domain at all goes with a delete by name.
    const orphan = spec(unique('orphan'));
    await lib(async (c, sg) =>
      c.storageVolCreateXml(
        await c.storagePoolLookupByName(host.pool, sg),
        `<volume><name>${orphan.name}.seed.iso</name><capacity unit='bytes'>4096</capacity><target><format type='raw'/></target></volume>`,
        0,
        sg,
      ),
    );
    await lifecycle().deleteInstance(orphan.name, host.name, { owner: orphan.owner, nameIsOurs: true }, sig());
    expect(await poolVolumes(orphan.name)).toEqual([]);
  });

  it('two workers writing one seed at once both succeed, and the volume holds the image', async () => {
    const s = spec(unique('race'));
    const seedName = `${s.name}.seed.iso`;
    // Large enough that the two uploads overlap; the bytes are deterministic, like a seed's.
    const image = Buffer.alloc(24 * 1024 * 1024);
    for (let i = 0; i < image.length; i += 4096) image.writeUInt32LE(i, i);
    // Two workers: two connections to the host.
    const other = createKvmHostPool({ logger, metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });
    const write = (p: KvmHostPool): Promise<void> =>
      p.call(
        host,
        async (conn: HostConnection, sg) => writeSeed(conn.libvirt, await conn.libvirt.storagePoolLookupByName(host.pool, sg), seedName, image, sg),
        sig(),
      );
    try {
      await Promise.all([write(pool), write(other)]);
    } finally {
      await other.close();
    }
    expect((await readFile(join(testHost.poolDir, seedName))).equals(image)).toBe(true);
  });

  it('a definition that can never work leaves neither the overlay nor the seed', async () => {
    const lc = lifecycle({ domainTemplate: `<domain type='qemu'><name>{{name}}</name><metadata>{{metadata}}</metadata><devices>{{disk}}</devices>` });
    const s = spec(unique('bad'));
    await expect(lc.ensureInstance(s, sig())).rejects.toBeInstanceOf(ProvisioningError);
    expect(await poolVolumes(s.name)).toEqual([]);
    expect(
      await lib(async (c, sg) => {
        try {
          await c.domainLookupByName(s.name, sg);
          return true;
        } catch (err) {
          if (isLibvirtNotFound(err)) return false;
          throw err;
        }
      }),
    ).toBe(false);
  });

  it('the provider configuration turns seeds on by default', () => {
    const parsed = kvmProviderSchema.parse({
      name: 'k',
      type: 'kvm',
      hosts: [{ name: 'h', address: '127.0.0.1', privateKeyFile: '/k', insecureIgnoreHostKey: true }],
      proxies: { baseImageVolume: 'debian-12-genericcloud-amd64.qcow2' },
    });
    expect(parsed.proxies?.bootUserData).toBe(true);
  });
});
