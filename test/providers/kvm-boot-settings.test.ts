/**
 * The kvm provider's settings for hosts without bridges, on the real test host (libvirtd behind
 * sshd): `domainType`, direct kernel boot (`kernel`: files uploaded to the pool once, by content)
 * and `portForward` (user-mode networking, one host port per proxy from a range, allocated from
 * what the host's domains hold, freed with the domain, moved when a start finds the port taken).
 * The guests here boot nothing; test/real/ boots a real one.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import type { LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { createKvmHostPool, createKvmPoolMetrics, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { createLogger, type Logger } from '../../src/logging.ts';
import type { InstanceSpec } from '../../src/providers/lifecycle.ts';
import { kvmProviderSchema, type KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { createKvmLifecycle, type KvmLifecycleOptions } from '../../src/providers/kvm/lifecycle.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';
import { choosePort, parsePortRange } from '../../src/providers/kvm/port-forward.ts';
import { kvmHostConfigOf, kvmTestHost, removeDomainAndVolumes, type KvmTestHost } from '../support/kvm-host.ts';
import { tempDir } from '../support/temp-dirs.ts';

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
const domains = new Set<string>();
const volumes = new Set<string>();
const servers: Server[] = [];

function lib<T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> {
  return pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());
}

const domainXmlOf = (name: string): Promise<string> => lib(async (c, s) => c.domainGetXmlDesc(await c.domainLookupByName(name, s), 0, s));

async function removeVolume(name: string): Promise<void> {
  await lib(async (c, s) => {
    const p = await c.storagePoolLookupByName(host.pool, s);
    const v = await orUndefined(c.storageVolLookupByName(p, name, s));
    if (v) await c.storageVolDelete(v, 0, s);
  });
}

function lifecycle(options: Partial<KvmLifecycleOptions>) {
  return createKvmLifecycle({ pool, hosts: [host], logger, options: { baseImageVolume: baseVolume, memoryMiB: 64, domainType: 'qemu', ...options } });
}

function spec(name: string): InstanceSpec {
  domains.add(name);
  volumes.add(`${name}.qcow2`);
  return { name, owner: { fleet: 'fleet-a', proxy: `proxy-${name}` }, credentials: { username: 'u', password: `pw-${RUN_ID}-secret` }, placement: host.name };
}

/** A listening socket on 127.0.0.1 (a port someone else holds); 0 picks a free one. */
async function listenOn(port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  servers.push(server);
  return server;
}

/** Two consecutive free ports on 127.0.0.1 (bound and released here; nothing else on the machine hands them out). */
async function freePortPair(): Promise<number> {
  for (;;) {
    const probe = await listenOn(0);
    const first = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    servers.splice(servers.indexOf(probe), 1);
    if (first >= 65535) continue;
    try {
      const a = await listenOn(first);
      const b = await listenOn(first + 1);
      await Promise.all([a, b].map((s) => new Promise((r) => s.close(r))));
      servers.splice(0, servers.length, ...servers.filter((s) => s !== a && s !== b));
      return first;
    } catch {
      for (const s of servers.splice(0)) s.close();
    }
  }
}

beforeAll(async () => {
  testHost = await kvmTestHost();
  host = kvmHostConfigOf(testHost, 'kvm-test');
  logger = createLogger({
    level: 'debug',
    destination: new Writable({ write: (c: Buffer, _e, done) => ((logText += c.toString()), done()) }),
  });
  pool = createKvmHostPool({ logger, metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });
  baseVolume = `${unique('base')}.qcow2`;
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', join(testHost.poolDir, baseVolume), '16M']);
  await lib(async (c, s) => c.storagePoolRefresh(await c.storagePoolLookupByName(host.pool, s), s));
});

afterEach(async () => {
  for (const name of domains) await lib((c, s) => removeDomainAndVolumes(c, s, host.pool, name, []));
  for (const v of volumes) await removeVolume(v);
  domains.clear();
  volumes.clear();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

afterAll(async () => {
  if (pool) {
    if (baseVolume) await removeVolume(baseVolume);
    await pool.close();
  }
});

describe('domainType', () => {
  it('is kvm unless set, qemu when set (a host without working hardware virtualisation)', async () => {
    const proxies = kvmProviderSchema.parse({ name: 'k', type: 'kvm', hosts: [{ ...host }], proxies: { baseImageVolume: 'b' } }).proxies;
    expect(proxies?.domainType).toBe('kvm');
    const s = spec(unique('tcg'));
    await lifecycle({ domainType: 'qemu' }).ensureInstance(s, sig());
    expect(await domainXmlOf(s.name)).toMatch(/^<domain type='qemu'/);
  });
});

describe('portForward', () => {
  it('gives each proxy its own host port from the range as its endpoint, through restricted user-mode networking', async () => {
    const first = await freePortPair();
    // A guest forward's host end need not listen when the domain starts: QEMU dials it until it does.
    const echo = { port: await freePortPair() };
    const lc = lifecycle({
      portForward: { address: '127.0.0.1', ports: `${first}-${first + 1}`, guestForwards: [{ guest: '10.0.2.100:8080', host: `127.0.0.1:${echo.port}` }] },
    });
    const a = await lc.ensureInstance(spec(unique('fwd')), sig());
    const b = await lc.ensureInstance(spec(unique('fwd')), sig());
    expect(a.state).toBe('running');
    expect([a.endpoint?.port, b.endpoint?.port].sort()).toEqual([first, first + 1]);
    expect(a.endpoint?.host).toBe('127.0.0.1');
    const xml = await domainXmlOf(a.name);
    expect(xml).toContain(`restrict=on,hostfwd=tcp:127.0.0.1:${a.endpoint?.port}-:3128`);
    expect(xml).toContain(`guestfwd=tcp:10.0.2.100:8080-tcp:127.0.0.1:${echo.port},,reconnect=1`);
    expect(xml).not.toContain('<interface');
    // The echo starts listening after the domains: each domain's QEMU connects its guest forward to it.
    const late = await listenOn(echo.port);
    let dialled = 0;
    await new Promise<void>((resolve) => late.on('connection', () => ++dialled === 2 && resolve()));
    // Read back as any worker would, and after a restart: the port is in the domain itself.
    expect((await lc.getInstance(a.name, host.name, sig()))?.endpoint).toEqual(a.endpoint);

    // The range is full: a third proxy waits (retryable), nothing of it is started.
    const full = spec(unique('fwd'));
    await expect(lc.ensureInstance(full, sig())).rejects.toMatchObject({ code: 'ERR_KVM_NO_FREE_PORT', retryable: true });
    // A delete frees its port for the next proxy.
    await lc.deleteInstance(a.name, host.name, { owner: a.owner, nameIsOurs: true }, sig());
    const c = await lc.ensureInstance(full, sig());
    expect(c.endpoint).toEqual(a.endpoint);
  });

  it('moves a proxy to another port when its start finds the chosen one held by another process', async () => {
    const first = await freePortPair();
    const range = `${first}-${first + 1}`;
    const s = spec(unique('taken'));
    const chosen = choosePort(parsePortRange(range)!, s.name, new Set())!;
    await listenOn(chosen);
    const instance = await lifecycle({ portForward: { address: '127.0.0.1', ports: range, guestForwards: [] } }).ensureInstance(s, sig());
    expect(instance.state).toBe('running');
    expect(instance.endpoint).toEqual({ host: '127.0.0.1', port: chosen === first ? first + 1 : first });
    expect(logText).toContain('forwarded host port taken at start; defining the domain on another');
  });

  it('is refused in configuration with a template that has no place for it, naming the field', () => {
    const parsed = kvmProviderSchema.safeParse({
      name: 'k',
      type: 'kvm',
      hosts: [{ ...host }],
      proxies: {
        baseImageVolume: 'b',
        portForward: { ports: '20000-20099' },
        domainTemplate: "<domain type='qemu'><name>{{name}}</name><metadata>{{metadata}}</metadata><devices>{{disk}}</devices></domain>",
      },
    });
    expect(parsed.success).toBe(false);
    const issues = parsed.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(issues).toContain('proxies.domainTemplate: must contain {{qemuCommandline}} when portForward is set');
    const badRange = kvmProviderSchema.safeParse({
      name: 'k',
      type: 'kvm',
      hosts: [{ ...host }],
      proxies: { baseImageVolume: 'b', portForward: { ports: '20099-20000' } },
    });
    expect(badRange.error?.issues.map((i) => i.path.join('.'))).toEqual(['proxies.portForward.ports']);
  });

  it('refuses guest forwards QEMU would refuse at start, naming the field; a network of its own makes room for a metadata address', () => {
    const issuesOf = (portForward: object) =>
      kvmProviderSchema
        .safeParse({ name: 'k', type: 'kvm', hosts: [{ ...host }], proxies: { baseImageVolume: 'b', portForward: { ports: '20000', ...portForward } } })
        .error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? [];
    const metadata = { guest: '169.254.169.254:80', host: '127.0.0.1:8081' };
    expect(issuesOf({ guestForwards: [{ guest: '10.0.2.100:80', host: '127.0.0.1:8080' }, metadata] })).toEqual([
      'proxies.portForward.guestForwards.1.guest: 169.254.169.254 is outside the guest network 10.0.2.0/24 (portForward.network)',
    ]);
    expect(issuesOf({ guestForwards: [{ guest: '10.0.2.2:80', host: '127.0.0.1:8080' }] })).toEqual([
      "proxies.portForward.guestForwards.0.guest: 10.0.2.2 is slirp's own host address in 10.0.2.0/24",
    ]);
    expect(issuesOf({ network: '10.0.2.0/31' })).toEqual(['proxies.portForward.network: must be an IPv4 CIDR such as 10.0.2.0/24, at most /30']);
    expect(issuesOf({ network: '169.254.0.0/16', guestForwards: [metadata] })).toEqual([]);
  });
});

/**
 * The smallest kernel QEMU boots: a Multiboot header with load addresses (no ELF), then `hlt; jmp`
 * back. QEMU loads it the way it loads a Linux kernel given as `<kernel>`; `extra` makes a changed one.
 */
function haltingKernel(extra = ''): Buffer {
  const magic = 0x1badb002;
  const flags = 0x00010000;
  const header = Buffer.alloc(32);
  [magic, flags, -(magic + flags) >>> 0, 0x100000, 0x100000, 0, 0, 0x100020].forEach((v, i) => header.writeUInt32LE(v >>> 0, i * 4));
  return Buffer.concat([header, Buffer.from([0xf4, 0xeb, 0xfd]), Buffer.from(extra)]);
}

describe('kernel', () => {
  it('uploads the kernel and initrd once, named by content, and boots domains from them', async () => {
    const dir = await tempDir('egress-kernel-');
    const kernelFile = join(dir, 'vmlinuz');
    const initrdFile = join(dir, 'initrd.img');
    await writeFile(kernelFile, haltingKernel());
    await writeFile(initrdFile, `initrd ${RUN_ID}`);
    const lc = lifecycle({ kernel: { kernelFile, initrdFile, cmdline: 'root=/dev/vda console=ttyS0' } });
    const a = spec(unique('kern'));
    const b = spec(unique('kern'));
    await lc.ensureInstance(a, sig());
    await lc.ensureInstance(b, sig());
    const xml = await domainXmlOf(b.name);
    const kernelPath = /<kernel>([^<]+)<\/kernel>/.exec(xml)?.[1] ?? '';
    const initrdPath = /<initrd>([^<]+)<\/initrd>/.exec(xml)?.[1] ?? '';
    expect(kernelPath).toMatch(new RegExp(`^${testHost.poolDir}/egress-boot-[0-9a-f]{16}-vmlinuz$`));
    expect(initrdPath).toMatch(/\/egress-boot-[0-9a-f]{16}-initrd\.img$/);
    expect(xml).toContain('<cmdline>root=/dev/vda console=ttyS0</cmdline>');
    for (const p of [kernelPath, initrdPath]) volumes.add(p.slice(p.lastIndexOf('/') + 1));
    expect(logText.split('\n').filter((l) => l.includes('uploading a file into a volume') && l.includes('egress-boot-')).length).toBe(2);
    // A changed kernel is a new volume: domains defined after it boot the new one.
    await writeFile(kernelFile, haltingKernel(RUN_ID));
    const c = spec(unique('kern'));
    await lc.ensureInstance(c, sig());
    const newPath = /<kernel>([^<]+)<\/kernel>/.exec(await domainXmlOf(c.name))?.[1] ?? '';
    volumes.add(newPath.slice(newPath.lastIndexOf('/') + 1));
    expect(newPath).not.toBe(kernelPath);
  });
});
