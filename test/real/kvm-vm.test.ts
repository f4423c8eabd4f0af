/**
 * A real proxy VM (issue 22 §1), `npm run test:real`: the kvm lifecycle, unchanged, on the real
 * test host (libvirtd behind sshd) boots a Debian 12 guest built by scripts/vm-image.sh (TCG,
 * direct kernel boot, user-mode networking with a forwarded host port), with the provider's own
 * NoCloud seed. The proxy the seed starts inside the guest carries a request to an origin on this
 * machine (reached from the guest through a guest forward), refuses requests without the
 * credentials, and its egress policy refuses the host and the metadata address from inside. The
 * delete leaves no domain or volume. Nothing leaves loopback: slirp runs with restrict=on.
 */
import { execFile } from 'node:child_process';
import { createServer as createHttpServer, request, type Server as HttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import type { LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { createKvmHostPool, createKvmPoolMetrics, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { createLogger } from '../../src/logging.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { createKvmLifecycle } from '../../src/providers/kvm/lifecycle.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';
import type { InstanceSpec, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { kvmHostConfigOf, kvmTestHost, removeDomainAndVolumes } from '../support/kvm-host.ts';

const run = promisify(execFile);
const VM_IMAGE = fileURLToPath(new URL('../../scripts/vm-image.sh', import.meta.url));
const RUN_ID = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
const NAME = `egt-vm-${RUN_ID}`;
const PASSWORD = `pw-${RUN_ID}-Vm9_secret`;
/** Under TCG a boot takes 1.5 minutes on an idle 2-core machine; several under load. */
const BOOT_DEADLINE_MS = 12 * 60_000;
/** Where the guest reaches the origin on this machine (a guest forward). */
const ORIGIN_IN_GUEST = '10.0.2.100:8099';

let host: KvmHostConfig;
let pool: KvmHostPool;
let lifecycle: ProxyLifecycle;
let origin: HttpServer;
let logText = '';
const held: Server[] = [];
/** Volumes the lifecycle uploads once per host (base, kernel, initrd): removed after the test. */
const sharedVolumes = new Set<string>();

const sig = (ms = 60_000): AbortSignal => AbortSignal.timeout(ms);
const lib = <T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> =>
  pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());

function listen(server: Server | HttpServer, port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
  });
}

/** A free port on 127.0.0.1 for the forward (bound, then released). */
async function freePort(): Promise<number> {
  const s = createServer();
  const port = await listen(s);
  await new Promise((r) => s.close(r));
  return port;
}

function viaProxy(
  endpoint: { host: string; port: number },
  target: string,
  auth: string | undefined,
  signal: AbortSignal,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: endpoint.host,
        port: endpoint.port,
        path: target,
        agent: false,
        signal,
        headers: { Host: new URL(target).host, ...(auth ? { 'Proxy-Authorization': `Basic ${Buffer.from(auth).toString('base64')}` } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * Waits for the proxy in the guest to answer on its forwarded port: slirp accepts on the host side
 * at once and drops the connection while nothing listens in the guest, so the first HTTP answer
 * is the proxy's. Each try is one request; the deadline bounds the whole boot.
 */
async function proxyAnswers(endpoint: { host: string; port: number }, deadline: AbortSignal): Promise<number> {
  for (;;) {
    deadline.throwIfAborted();
    const answer = await viaProxy(endpoint, `http://${ORIGIN_IN_GUEST}/ready`, undefined, AbortSignal.any([deadline, AbortSignal.timeout(10_000)])).catch(
      () => undefined,
    );
    if (answer) return answer.status;
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

beforeAll(async () => {
  const image = (await run('bash', [VM_IMAGE], { maxBuffer: 16 * 1024 * 1024 })).stdout.trim().split('\n').pop() ?? '';
  const testHost = await kvmTestHost();
  host = kvmHostConfigOf(testHost, 'kvm-real');
  const logger = createLogger({ level: 'debug', destination: new Writable({ write: (c: Buffer, _e, done) => ((logText += c.toString()), done()) }) });
  pool = createKvmHostPool({ logger, metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });
  // QEMU's guest forward connects to the origin once, when the domain starts, and carries every guest
  // connection over that one stream: the origin must not time it out while the guest boots.
  origin = createHttpServer({ requestTimeout: 0, headersTimeout: 0, keepAliveTimeout: 0 }, (_req, res) =>
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('origin says hello'),
  );
  const originPort = await listen(origin);
  const forwardPort = await freePort();
  const baseImageVolume = `egt-vm-base-${RUN_ID}.qcow2`;
  sharedVolumes.add(baseImageVolume);
  lifecycle = createKvmLifecycle({
    pool,
    hosts: [host],
    logger,
    options: {
      baseImageVolume,
      baseImageFile: join(image, 'base.qcow2'),
      baseImageFormat: 'qcow2',
      bootUserData: true,
      domainType: 'qemu',
      memoryMiB: 1024,
      vcpus: 2,
      kernel: { kernelFile: join(image, 'vmlinuz'), initrdFile: join(image, 'initrd.img'), cmdline: 'root=/dev/vda rw console=ttyS0' },
      portForward: { address: '127.0.0.1', ports: String(forwardPort), guestForwards: [{ guest: ORIGIN_IN_GUEST, host: `127.0.0.1:${originPort}` }] },
    },
    egressPolicy: proxyEgressPolicy({ allow: ['10.0.2.100/32'], deny: [] }, undefined),
  });
}, 20 * 60_000);

afterAll(async () => {
  if (pool) {
    await lib((c, s) => removeDomainAndVolumes(c, s, host.pool, NAME, []));
    await lib(async (c, s) => {
      const p = await c.storagePoolLookupByName(host.pool, s);
      for (const vol of await c.storagePoolListAllVolumes(p, s)) {
        if (sharedVolumes.has(vol.name) || vol.name.startsWith('egress-boot-')) await c.storageVolDelete(vol, 0, s);
      }
    });
    await pool.close();
  }
  origin?.close();
  for (const s of held) s.close();
}, 120_000);

describe('a KVM proxy in a real VM', () => {
  it(
    'boots from the provider’s seed, carries traffic to an origin on the host, refuses the inside, and is deleted without a trace',
    async () => {
      const spec: InstanceSpec = {
        name: NAME,
        owner: { fleet: 'fleet-real', proxy: 'vm-1' },
        credentials: { username: 'u-vm', password: PASSWORD },
        placement: host.name,
      };
      const instance = await lifecycle.ensureInstance(spec, sig(10 * 60_000));
      expect(instance.state).toBe('running');
      const endpoint = instance.endpoint;
      expect(endpoint?.host).toBe('127.0.0.1');
      if (!endpoint) throw new Error('no endpoint');

      // Without credentials the first answer is the proxy's 407: it booted, and it is ours.
      expect(await proxyAnswers(endpoint, AbortSignal.timeout(BOOT_DEADLINE_MS))).toBe(407);
      const ok = await viaProxy(endpoint, `http://${ORIGIN_IN_GUEST}/hello`, `u-vm:${PASSWORD}`, sig());
      expect(ok).toEqual({ status: 200, body: 'origin says hello' });
      expect((await viaProxy(endpoint, `http://${ORIGIN_IN_GUEST}/hello`, `u-vm:not-${PASSWORD}`, sig())).status).toBe(407);
      // The egress policy inside the guest: slirp's host address (the orchestrator's side) and the metadata address are refused.
      for (const inside of ['http://10.0.2.2:8080/', 'http://169.254.169.254/computeMetadata/v1/']) {
        const refused = await viaProxy(endpoint, inside, `u-vm:${PASSWORD}`, sig());
        expect(refused.status, inside).toBe(403);
      }
      expect(logText).not.toContain(PASSWORD);

      await lifecycle.deleteInstance(NAME, host.name, { owner: spec.owner, nameIsOurs: true }, sig());
      expect(await lifecycle.getInstance(NAME, host.name, sig())).toBeUndefined();
      const left = await lib(async (c, s) => {
        const p = await c.storagePoolLookupByName(host.pool, s);
        return Promise.all([`${NAME}.qcow2`, `${NAME}.seed.iso`].map(async (v) => ((await orUndefined(c.storageVolLookupByName(p, v, s))) ? v : undefined)));
      });
      expect(left.filter(Boolean)).toEqual([]);
    },
    BOOT_DEADLINE_MS + 10 * 60_000,
  );
});
