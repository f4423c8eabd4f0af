/**
 * The gcp provider's boot, in a real VM (issue 22 §1), `npm run test:real`: the gcp lifecycle inserts
 * an instance into the fake Compute API (through the real client library) with its `user-data`,
 * `startup-script` and `egress-proxy-policy` metadata items; that user-data boots in the same kind of
 * Debian 12 VM the kvm tests use (scripts/vm-image.sh, TCG, on the real KVM test host), handed over
 * the way GCE's cloud-init would find it locally: a NoCloud seed. The instance's metadata server is a
 * fake on 169.254.169.254:80 inside the guest (a guest forward) serving the instance's items as the
 * fake Compute holds them, so the policy sync unit reads the policy the provider wrote. The proxy
 * then carries traffic to an origin on this machine with the instance's credentials, refuses
 * without them, and refuses the metadata address and the host from inside.
 * What this does not prove (docs/gcp-provider.md): GCE's own image, its guest agent running the
 * startup script (the image here has cloud-init, so the script's fallback install is not taken),
 * Google's metadata server and network.
 */
import type { Server as HttpServer } from 'node:http';
import { OAuth2Client } from 'google-auth-library';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import type { LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { createKvmHostPool, createKvmPoolMetrics, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { createLogger } from '../../src/logging.ts';
import { renderMetaData } from '../../src/providers/boot/cloud-init.ts';
import { nocloudSeed } from '../../src/providers/boot/nocloud-seed.ts';
import { createComputeClients, type ComputeClients } from '../../src/providers/gcp/index.ts';
import { createGcpLifecycle, METADATA_POLICY, METADATA_STARTUP_SCRIPT, METADATA_USER_DATA } from '../../src/providers/gcp/lifecycle.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { DEFAULT_DOMAIN_TEMPLATE } from '../../src/providers/kvm/domain-xml.ts';
import { createKvmLifecycle } from '../../src/providers/kvm/lifecycle.ts';
import { writeSeed } from '../../src/providers/kvm/seed.ts';
import type { InstanceSpec } from '../../src/providers/lifecycle.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { kvmHostConfigOf, kvmTestHost, removeDomainAndVolumes } from '../support/kvm-host.ts';
import { guestStreamServer } from './support/guest-forward.ts';
import {
  BOOT_DEADLINE_MS,
  capturedLogger,
  firstAnswer,
  freePorts,
  listen,
  removeVolumes,
  RUN_ID,
  viaProxy,
  vmImage,
  vmSettings,
  type VmImage,
} from './support/vm.ts';

const NAME = `ep-gcp-vm-${RUN_ID}`;
const ZONE = 'us-central1-a';
const PASSWORD = `pw-${RUN_ID}-Gce7_secret`;
/** The guest's network is link-local, as GCE's metadata address needs (a guest forward lies in the guest's network). */
const GUEST_NETWORK = '169.254.0.0/16';
const ORIGIN_IN_GUEST = '169.254.0.100:8099';
const METADATA_IN_GUEST = '169.254.169.254:80';

let host: KvmHostConfig;
let pool: KvmHostPool;
let compute: FakeCompute;
let clients: ComputeClients;
let logText: () => string;
let image: VmImage;
const servers: HttpServer[] = [];
const seedVolume = `egt-gcp-seed-${RUN_ID}.iso`;
const baseImageVolume = `egt-gcp-base-${RUN_ID}.qcow2`;

const sig = (ms = 60_000): AbortSignal => AbortSignal.timeout(ms);
const lib = <T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> =>
  pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());

/**
 * The instance's metadata server as the guest sees it: `instance/attributes/<key>` from what the fake
 * Compute holds for the instance now, with an ETag of its value and `wait_for_change` hanging until
 * the value differs from `last_etag` (never, here: the test changes nothing). `Metadata-Flavor: Google`
 * is required, as on GCE.
 */
function metadataServer(): HttpServer {
  const prefix = '/computeMetadata/v1/instance/attributes/';
  return guestStreamServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://metadata.google.internal');
    const items = compute.getInstance(ZONE, NAME)?.metadata.items ?? [];
    const item = items.find((i) => `${prefix}${i.key}` === url.pathname);
    if (req.headers['metadata-flavor'] !== 'Google' || !item) {
      res.writeHead(404, { 'Content-Length': '0' }).end();
      return;
    }
    const etag = Buffer.from(item.value ?? '')
      .toString('base64url')
      .slice(-16);
    if (url.searchParams.get('wait_for_change') === 'true' && url.searchParams.get('last_etag') === etag) return; // hangs until the test ends
    const body = Buffer.from(item.value ?? '');
    res.writeHead(200, { 'Content-Type': 'application/text', ETag: etag, 'Metadata-Flavor': 'Google', 'Content-Length': String(body.length) }).end(body);
  });
}

beforeAll(async () => {
  image = await vmImage();
  host = kvmHostConfigOf(await kvmTestHost(), 'gcp-real');
  const captured = capturedLogger();
  const logger = captured.logger;
  logText = captured.text;
  pool = createKvmHostPool({ logger, metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });
  compute = await startFakeCompute({ project: 'egress-test', tokens: ['good-token'] });
  const auth = new OAuth2Client();
  auth.setCredentials({ access_token: 'good-token', expiry_date: Date.now() + 3_600_000 });
  clients = createComputeClients({ ...compute.clientOptions(), authClient: auth });

  const gcp = createGcpLifecycle({
    clients,
    project: 'egress-test',
    zone: ZONE,
    image: 'projects/debian-cloud/global/images/family/debian-12',
    logger,
    operationPollMs: 0,
    bootUserData: true,
    egressPolicy: proxyEgressPolicy({ allow: ['169.254.0.100/32'], deny: [] }, undefined),
  });
  const spec: InstanceSpec = { name: NAME, owner: { fleet: 'fleet-real', proxy: 'gce-1' }, credentials: { username: 'u-gce', password: PASSWORD } };
  await gcp.ensureInstance(spec, sig());
  const items = Object.fromEntries((compute.getInstance(ZONE, NAME)?.metadata.items ?? []).map((i) => [i.key, i.value ?? '']));
  expect(items[METADATA_STARTUP_SCRIPT]).toMatch(/^#!\/bin\/sh\n/);
  expect(items[METADATA_POLICY]).toContain('169.254.0.100/32');

  // The user-data exactly as inserted, in a NoCloud seed volume of its own.
  await lib(async (c, s) =>
    writeSeed(c, await c.storagePoolLookupByName(host.pool, s), seedVolume, nocloudSeed(items[METADATA_USER_DATA] ?? '', renderMetaData(NAME, NAME)), s),
  );
}, 20 * 60_000);

afterAll(async () => {
  if (pool) {
    await lib((c, s) => removeDomainAndVolumes(c, s, host.pool, NAME)).catch(() => undefined);
    await lib((c, s) => removeVolumes(c, s, host.pool, (v) => v === seedVolume || v === baseImageVolume));
    await pool.close();
  }
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  await clients?.close();
  await compute?.close();
}, 120_000);

describe('the gcp user-data in a real VM', () => {
  it(
    'boots, reads its policy from the metadata server, and its proxy carries traffic with the instance’s credentials',
    async () => {
      const origin = guestStreamServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '17' }).end('origin says hello'));
      const metadata = metadataServer();
      servers.push(origin, metadata);
      const [originPort, metadataPort, forwardPort] = [await listen(origin), await listen(metadata), await freePorts()];
      // The kvm lifecycle as the VM's host, without its own seed: the domain template attaches the gcp seed instead.
      const seedDisk = `<disk type='volume' device='disk'><driver name='qemu' type='raw'/><source pool='${host.pool}' volume='${seedVolume}'/><target dev='vdb' bus='virtio'/><readonly/></disk>`;
      const vm = createKvmLifecycle({
        pool,
        hosts: [host],
        logger: createLogger({ level: 'silent' }),
        options: {
          ...vmSettings(image, baseImageVolume),
          domainTemplate: DEFAULT_DOMAIN_TEMPLATE.replace('{{disk}}', `{{disk}}${seedDisk}`),
          bootUserData: false,
          portForward: {
            address: '127.0.0.1',
            ports: String(forwardPort),
            guestForwards: [
              { guest: ORIGIN_IN_GUEST, host: `127.0.0.1:${originPort}` },
              { guest: METADATA_IN_GUEST, host: `127.0.0.1:${metadataPort}` },
            ],
            network: GUEST_NETWORK,
          },
        },
      });
      const instance = await vm.ensureInstance(
        {
          name: NAME,
          owner: { fleet: 'fleet-real', proxy: 'gce-1' },
          credentials: { username: 'kvm-unused', password: `unused-${RUN_ID}` },
          placement: host.name,
        },
        sig(10 * 60_000),
      );
      const port = instance.endpoint?.port ?? 0;
      expect(port).toBe(forwardPort);

      // The first HTTP answer is the proxy's (slirp drops connections while nothing listens in the guest).
      const deadline = AbortSignal.timeout(BOOT_DEADLINE_MS);
      const first = await firstAnswer({ host: '127.0.0.1', port }, `http://${ORIGIN_IN_GUEST}/ready`, deadline);
      expect(first).toBe(407);
      // The policy arrives from the metadata server a moment after the proxy listens (it fails closed until then).
      let ok = await viaProxy({ host: '127.0.0.1', port }, `http://${ORIGIN_IN_GUEST}/hello`, `u-gce:${PASSWORD}`, sig());
      while (ok.status === 403 && !deadline.aborted) {
        await new Promise((r) => setTimeout(r, 1_000));
        ok = await viaProxy({ host: '127.0.0.1', port }, `http://${ORIGIN_IN_GUEST}/hello`, `u-gce:${PASSWORD}`, sig());
      }
      expect(ok).toEqual({ status: 200, body: 'origin says hello' });
      expect((await viaProxy({ host: '127.0.0.1', port }, `http://${ORIGIN_IN_GUEST}/hello`, `u-gce:not-${PASSWORD}`, sig())).status).toBe(407);
      expect((await viaProxy({ host: '127.0.0.1', port }, `http://${ORIGIN_IN_GUEST}/hello`, `kvm-unused:unused-${RUN_ID}`, sig())).status).toBe(407);
      // The metadata server (the policy sync reads it directly, not through the proxy) and slirp's host address.
      for (const inside of ['http://169.254.169.254/computeMetadata/v1/instance/attributes/user-data', 'http://169.254.0.2:8080/']) {
        expect((await viaProxy({ host: '127.0.0.1', port }, inside, `u-gce:${PASSWORD}`, sig())).status, inside).toBe(403);
      }
      expect(logText()).not.toContain(PASSWORD);
    },
    BOOT_DEADLINE_MS + 10 * 60_000,
  );
});
