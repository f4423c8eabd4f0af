import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { isLibvirtNotFound, type LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { silentLogger } from '../../src/logging.ts';
import { createRegistry } from '../../src/metrics/registry.ts';
import { kvmProviderSchema } from '../../src/providers/kvm/config.ts';
import { createKvmProvider, type KvmProvider } from '../../src/providers/kvm/index.ts';
import { sweepProvider } from '../../src/proxies/gc.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { uniquePrefix } from '../support/config.ts';
import { kvmTestHost } from '../support/kvm-host.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';
import { freePort } from '../../src/redis/redis-server.ts';

const run = promisify(execFile);
const ID = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;

// GC on the real libvirtd: a tagged orphan is deleted with its volume; a domain without our
// tag in the same pool is never touched, however old.
describe('garbage collection on KVM', () => {
  let provider: KvmProvider;
  let redis: Redis;
  let store: RedisProxyStore;
  const base = `egt-gc-${ID}-base.qcow2`;
  const untagged = `egt-gc-${ID}-theirs`;
  const orphan = `ep-ghost-${ID}`;
  const signal = AbortSignal.timeout(120_000);
  const lib = <T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> =>
    provider.pool.call(provider.pool && hostConfig(), (conn: HostConnection, s) => fn(conn.libvirt, s), AbortSignal.timeout(30_000));
  let hostConfig: () => Parameters<KvmProvider['pool']['call']>[0];

  beforeAll(async () => {
    const host = await kvmTestHost();
    const config = kvmProviderSchema.parse({
      name: 'kvm',
      type: 'kvm',
      hosts: [
        {
          name: 'local-kvm',
          address: host.ssh.host,
          port: host.ssh.port,
          privateKeyFile: host.ssh.keyFile,
          knownHostsFile: host.ssh.knownHostsFile,
          pool: host.pool,
        },
      ],
      proxies: { baseImageVolume: base, memoryMiB: 64, domainType: 'qemu' },
    });
    hostConfig = () => config.hosts[0]!;
    provider = createKvmProvider(config, { logger: silentLogger(), registry: createRegistry(), dataDir: tmpdir() });
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', join(host.poolDir, base), '16M']);
    await lib(async (c, s) => c.storagePoolRefresh(await c.storagePoolLookupByName(host.pool, s), s));
    redis = new Redis(inject('redisUrl'));
    store = new RedisProxyStore(redis, uniquePrefix());
  });

  afterAll(async () => {
    for (const name of [untagged, orphan]) {
      await lib(async (c, s) => {
        const dom = await orUndefined(c.domainLookupByName(name, s));
        if (!dom) return;
        await c.domainDestroy(dom, 0, s).catch(() => undefined);
        await c.domainUndefine(dom, 0, s).catch(() => undefined);
      }).catch(() => undefined);
    }
    for (const vol of [base, `${orphan}.qcow2`]) {
      await lib(async (c, s) => {
        const p = await c.storagePoolLookupByName(hostConfig().pool, s);
        const v = await c.storageVolLookupByName(p, vol, s).catch(() => undefined);
        if (v) await c.storageVolDelete(v, 0, s);
      }).catch(() => undefined);
    }
    await provider?.close();
    await store?.close();
    redis?.disconnect();
  });

  test('a tagged orphan goes, an untagged domain stays; not while a host of the provider cannot be listed', async () => {
    const lifecycle = provider.lifecycle!;
    await lifecycle.ensureInstance(
      { name: orphan, owner: { fleet: 'gc-kvm', proxy: 'ghost' }, credentials: { username: 'u', password: 'p-0123456789abcdef' } },
      signal,
    );
    await lib((c, s) =>
      c.domainDefineXml(
        `<domain type='qemu'><name>${untagged}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os></domain>`,
        0,
        s,
      ),
    );
    const deps = { proxies: store, fleet: 'gc-kvm', graceMs: 600_000, logger: silentLogger(), now: () => new Date(Date.now() + 3_600_000) };

    // The same host beside one that refuses connections: its inventory is incomplete, so the sweep
    // lists the reachable host, fails, and deletes nothing.
    const closedPort = await freePort();
    const twoHosts = createKvmProvider(
      kvmProviderSchema.parse({
        name: 'kvm',
        type: 'kvm',
        hosts: [hostConfig(), { ...hostConfig(), name: 'gone-kvm', port: closedPort }],
        proxies: { baseImageVolume: base, memoryMiB: 64, domainType: 'qemu' },
      }),
      { logger: silentLogger(), registry: createRegistry(), dataDir: tmpdir() },
    );
    try {
      await expect(sweepProvider('kvm', twoHosts.lifecycle!, { ...deps, deletesPerSecond: 5 }, signal)).rejects.toThrow(
        `connect ECONNREFUSED 127.0.0.1:${closedPort}`,
      );
    } finally {
      await twoHosts.close();
    }
    expect(await lib(async (c, s) => Boolean(await orUndefined(c.domainLookupByName(orphan, s))))).toBe(true);

    const result = await sweepProvider('kvm', lifecycle, { ...deps, deletesPerSecond: 5 }, signal);
    expect(result).toMatchObject({ seen: 1, kept: 0, young: 0, deleted: [{ name: orphan, reason: 'no-proxy' }] });
    const exists = (name: string) =>
      lib((c, s) =>
        c.domainLookupByName(name, s).then(
          () => true,
          (err: unknown) => {
            if (isLibvirtNotFound(err)) return false;
            throw err;
          },
        ),
      );
    expect(await exists(orphan)).toBe(false);
    expect(await exists(untagged)).toBe(true);
    const volumeGone = await lib(async (c, s) => {
      const p = await c.storagePoolLookupByName(hostConfig().pool, s);
      return c.storageVolLookupByName(p, `${orphan}.qcow2`, s).then(
        () => false,
        (err: unknown) => isLibvirtNotFound(err),
      );
    });
    expect(volumeGone).toBe(true);
  });
});
