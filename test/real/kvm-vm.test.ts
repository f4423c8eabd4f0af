/**
 * A real proxy VM through the roles (issue 22 §1), `npm run test:real`: scheduler, worker (checks,
 * reconcile, GC), publisher and API in this process, with a kvm provider on the real test host
 * (libvirtd behind sshd) whose proxies boot a Debian 12 guest built by scripts/vm-image.sh (TCG,
 * direct kernel boot, user-mode networking with a forwarded host port) from the provider's own
 * NoCloud seed. A Proxy applied through the API comes Ready after the real readiness probe through
 * the VM to the API's echo (reached from the guest through a guest forward), carries a request to
 * an origin on this machine, refuses the API's other paths, the host and the metadata address from
 * inside; the host's ProviderHealth stays Ok with the domain running; a tagged domain without a
 * Proxy is collected by GC; SIGKILL of the VM's QEMU takes the proxy out of discovery and a
 * reconcile boots the domain again; the delete leaves no domain or volume. Nothing leaves loopback:
 * slirp runs with restrict=on. Every wait is for an answer or a state, bounded by a deadline.
 */
import { readFile } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig } from '../../src/config/app.ts';
import { parseConfigDocument } from '../../src/config/file.ts';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { isLibvirtNotFound, type LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { createKvmHostPool, createKvmPoolMetrics, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { createLogger } from '../../src/logging.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { createKvmLifecycle } from '../../src/providers/kvm/lifecycle.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { fleetOf } from '../../src/proxies/instance-name.ts';
import { testConfig, uniquePrefix } from '../support/config.ts';
import { kvmHostConfigOf, kvmTestHost, removeDomainAndVolumes, type KvmTestHost } from '../support/kvm-host.ts';
import { waitFor } from '../support/wait.ts';
import { guestStreamRelay, guestStreamServer } from './support/guest-forward.ts';
import { BOOT_DEADLINE_MS, capturedLogger, freePorts, listen, removeVolumes, RUN_ID, run, viaProxy, vmImage, vmSettings } from './support/vm.ts';

const PROVIDER = 'kvm-real';
const PROXY = `vm-${RUN_ID}`;
/** Where the guest reaches the origin on this machine, and the API's echo (guest forwards). */
const ORIGIN_IN_GUEST = '10.0.2.100:8099';
const API_IN_GUEST = '10.0.2.101:8080';

let testHost: KvmTestHost;
let host: KvmHostConfig;
let pool: KvmHostPool;
let roles: RunningRoles | undefined;
let api = '';
let logText: () => string;
const servers: HttpServer[] = [];
const prefix = uniquePrefix();
const baseImageVolume = `egt-vm-base-${RUN_ID}.qcow2`;
const orphanBase = `egt-vm-orphan-base-${RUN_ID}.qcow2`;
const orphan = `ep-ghost-${RUN_ID}`;
/** Domains this file may leave on a failure (removed after it, with their volumes). */
const domains = new Set<string>([orphan]);

const sig = (ms = 60_000): AbortSignal => AbortSignal.timeout(ms);
const lib = <T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> =>
  pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());

/** A request through the proxy at `proxyUrl` with its own credentials, none, or a wrong password. */
function through(
  proxyUrl: string,
  target: string,
  signal: AbortSignal,
  auth: 'theirs' | 'none' | 'wrong' = 'theirs',
): Promise<{ status: number; body: string }> {
  const u = new URL(proxyUrl);
  const creds = `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}${auth === 'wrong' ? 'x' : ''}`;
  return viaProxy({ host: u.hostname, port: u.port }, target, auth === 'none' ? undefined : creds, signal);
}

const getJson = async <T>(path: string): Promise<T> => (await (await fetch(`${api}${path}`, { signal: sig() })).json()) as T;
const proxyView = (): Promise<ProxyView> => getJson<ProxyView>(`/v1/proxies/${PROXY}`);
const readyNames = async (): Promise<string[]> => (await getJson<{ items: ProxyView[] }>('/v1/proxies?ready=true')).items.map((p) => p.name);
const exists = (name: string): Promise<boolean> => lib(async (c, s) => Boolean(await orUndefined(c.domainLookupByName(name, s))));

beforeAll(async () => {
  const image = await vmImage();
  testHost = await kvmTestHost();
  host = kvmHostConfigOf(testHost, 'kvm-real-host');
  const captured = capturedLogger();
  const logger = captured.logger;
  logText = captured.text;
  pool = createKvmHostPool({ logger, metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });

  const origin = guestStreamServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '17' }).end('origin says hello'));
  const echoRelay = guestStreamRelay(() => api);
  servers.push(origin, echoRelay);
  const [originPort, relayPort] = [await listen(origin), await listen(echoRelay)];
  const first = await freePorts(4);
  const { providers } = parseConfigDocument(
    {
      providers: [
        {
          name: PROVIDER,
          type: 'kvm',
          hosts: [host],
          proxies: {
            ...vmSettings(image, baseImageVolume),
            baseImageFormat: 'qcow2',
            bootUserData: true,
            portForward: {
              address: '127.0.0.1',
              ports: `${first}-${first + 3}`,
              guestForwards: [
                { guest: ORIGIN_IN_GUEST, host: `127.0.0.1:${originPort}` },
                { guest: API_IN_GUEST, host: `127.0.0.1:${relayPort}` },
              ],
            },
            egressPolicy: { allow: ['10.0.2.100/31'] },
          },
        },
      ],
    },
    'test',
  );
  const base = testConfig({
    providers,
    prefix,
    queues: ['checks', 'reconcile', 'gc'],
    intervalMs: 5_000,
    timeoutMs: 20_000,
    // A reconcile every 10 s looks at every proxy: the one whose QEMU was killed is started again.
    resyncMs: 10_000,
    gcIntervalMs: 2_000,
    gcGraceMs: 1_000,
    lockDurationMs: 30_000,
    // TCG is slow: a probe may take seconds, and a boot must not count as "unready too long".
    readiness: { intervalMs: 3_000, timeoutMs: 20_000, failureThreshold: 1, successThreshold: 2, replaceAfterMs: 60 * 60_000 },
  });
  // The guests reach the API's echo at its forwarded address (the relay carries it to the API).
  roles = await runRoles(freezeConfig({ ...base, echoUrl: `http://${API_IN_GUEST}/v1/echo` }), ['publisher', 'worker', 'scheduler', 'api'], logger);
  api = roles.api?.url ?? '';
}, 20 * 60_000);

afterAll(async () => {
  if (api) {
    await fetch(`${api}/v1/proxies/${PROXY}`, { method: 'DELETE' }).catch(() => undefined);
    await waitFor('the proxy gone', async () => (await fetch(`${api}/v1/proxies/${PROXY}`)).status === 404, 120_000).catch(() => undefined);
  }
  await roles?.close();
  if (pool) {
    for (const name of domains) await lib((c, s) => removeDomainAndVolumes(c, s, host.pool, name, ['.qcow2', '.seed.iso'])).catch(() => undefined);
    await lib((c, s) => removeVolumes(c, s, host.pool, (v) => v === baseImageVolume || v === orphanBase));
    await pool.close();
  }
  for (const s of servers) s.close();
}, 10 * 60_000);

describe('a KVM proxy in a real VM, through the roles', () => {
  it(
    'comes Ready after a real probe, carries traffic, refuses the inside, survives a killed QEMU, and leaves nothing when deleted',
    async () => {
      const applied = await fetch(`${api}/v1/proxies`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ metadata: { name: PROXY }, spec: { provider: PROVIDER } }),
      });
      expect(applied.status).toBe(200);
      const ready = await waitFor(
        `${PROXY} Ready`,
        async () => {
          const p = await proxyView();
          if (p.status.instanceName) domains.add(p.status.instanceName);
          return p.status.phase === 'Ready' ? p : undefined;
        },
        BOOT_DEADLINE_MS,
        1_000,
      );
      const instance = ready.status.instanceName ?? '';
      const proxyUrl = ready.proxyUrl ?? '';
      expect(ready.status.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(await readyNames()).toContain(PROXY);

      // Through its URL: the origin on this machine with the credentials, 407 without or with wrong ones.
      expect(await through(proxyUrl, `http://${ORIGIN_IN_GUEST}/hello`, sig())).toEqual({ status: 200, body: 'origin says hello' });
      expect((await through(proxyUrl, `http://${ORIGIN_IN_GUEST}/hello`, sig(), 'none')).status).toBe(407);
      expect((await through(proxyUrl, `http://${ORIGIN_IN_GUEST}/hello`, sig(), 'wrong')).status).toBe(407);
      // The egress policy inside the guest: the API beyond its echo, slirp's host address and the metadata address are refused.
      for (const inside of [`http://${API_IN_GUEST}/v1/proxies`, 'http://10.0.2.2:8080/', 'http://169.254.169.254/computeMetadata/v1/']) {
        expect((await through(proxyUrl, inside, sig())).status, inside).toBe(403);
      }

      // The host's ProviderHealth is Ok while the domain runs.
      const health = await waitFor(
        'a ProviderHealth round with the domain running',
        async () => {
          const ph = await getJson<ProviderHealth>(`/v1/providerhealths/${PROVIDER}`).catch(() => undefined);
          return ph?.status.targets.length ? ph : undefined;
        },
        120_000,
        500,
      );
      expect(health.status.targets.map((t) => [t.name, t.ready, t.reason])).toEqual([[host.name, true, 'Ok']]);

      // A tagged domain of this fleet without a Proxy is an orphan: GC deletes it and its overlay.
      await run('qemu-img', ['create', '-q', '-f', 'qcow2', join(testHost.poolDir, orphanBase), '16M']);
      await lib(async (c, s) => c.storagePoolRefresh(await c.storagePoolLookupByName(host.pool, s), s));
      const orphans = createKvmLifecycle({
        pool,
        hosts: [host],
        logger: createLogger({ level: 'silent' }),
        options: { baseImageVolume: orphanBase, memoryMiB: 64, domainType: 'qemu' },
        egressPolicy: proxyEgressPolicy({ allow: [], deny: [] }, undefined),
      });
      await orphans.ensureInstance(
        {
          name: orphan,
          owner: { fleet: fleetOf(prefix), proxy: 'ghost' },
          credentials: { username: 'u', password: `p-${RUN_ID}-orphan` },
          placement: host.name,
        },
        sig(),
      );
      await waitFor('GC to collect the orphan domain', async () => !(await exists(orphan)), 120_000, 500);
      const overlayLeft = await lib(async (c, s) =>
        c.storageVolLookupByName(await c.storagePoolLookupByName(host.pool, s), `${orphan}.qcow2`, s).then(
          () => true,
          (err: unknown) => !isLibvirtNotFound(err),
        ),
      );
      expect(overlayLeft).toBe(false);
      expect(await exists(instance)).toBe(true);

      // SIGKILL of the VM's QEMU: the proxy leaves discovery, and a reconcile boots its domain again.
      const pidFile = `/run/libvirt/qemu/${instance}.pid`;
      const killed = Number((await readFile(pidFile, 'utf8')).trim());
      process.kill(killed, 'SIGKILL');
      await waitFor(`${PROXY} out of discovery`, async () => !(await readyNames()).includes(PROXY), 120_000, 250);
      const back = await waitFor(
        `${PROXY} Ready again on a new QEMU`,
        async () => {
          const p = await proxyView();
          const pid = Number((await readFile(pidFile, 'utf8').catch(() => '0')).trim());
          return p.status.phase === 'Ready' && pid !== 0 && pid !== killed ? p : undefined;
        },
        BOOT_DEADLINE_MS,
        1_000,
      );
      expect(back.status.url).toBe(ready.status.url);
      expect(await through(proxyUrl, `http://${ORIGIN_IN_GUEST}/again`, sig())).toEqual({ status: 200, body: 'origin says hello' });
      expect(logText()).not.toContain(new URL(proxyUrl).password);

      // The delete: the Proxy, its domain, overlay and seed go.
      expect((await fetch(`${api}/v1/proxies/${PROXY}`, { method: 'DELETE' })).status).toBeLessThan(300);
      await waitFor(`${PROXY} gone`, async () => (await fetch(`${api}/v1/proxies/${PROXY}`)).status === 404, 120_000, 250);
      expect(await exists(instance)).toBe(false);
      const left = await lib(async (c, s) => {
        const p = await c.storagePoolLookupByName(host.pool, s);
        return Promise.all(
          [`${instance}.qcow2`, `${instance}.seed.iso`].map(async (v) => ((await orUndefined(c.storageVolLookupByName(p, v, s))) ? v : undefined)),
        );
      });
      expect(left.filter(Boolean)).toEqual([]);
    },
    3 * BOOT_DEADLINE_MS,
  );
});
