/**
 * One harness per provider for the conformance suite (conformance.ts): each builds its provider
 * from parsed configuration through the real factory, against the backend the provider's own
 * tests use — local processes, the real KVM test host, the kube-apiserver and Compute fakes
 * driven by the real clients — and looks at that backend directly.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { OAuth2Client } from 'google-auth-library';
import { Registry } from 'prom-client';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { isLibvirtNotFound, type LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { silentLogger } from '../../src/logging.ts';
import { createProvider } from '../../src/providers/create-provider.ts';
import { createComputeClients, createGcpProvider, gcpProviderSchema } from '../../src/providers/gcp/index.ts';
import { createKubernetesProvider, kubernetesProviderSchema } from '../../src/providers/kubernetes/index.ts';
import { createKvmProvider, kvmProviderSchema, type KvmHostConfig, type KvmProvider } from '../../src/providers/kvm/index.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';
import { localProviderSchema } from '../../src/providers/local/index.ts';
import { upstreamProviderSchema } from '../../src/providers/upstream/config.ts';
import { listenForwardProxy, type ForwardProxy } from '../../src/forward-proxy/server.ts';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { once } from 'node:events';
import { appendFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { instanceDir } from '../../src/providers/local/instance-files.ts';
import { findHostProcesses, findProxyProcesses } from '../../src/providers/local/process-table.ts';
import type { Provider, ProviderDeps } from '../../src/providers/types.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { servedByHost } from '../support/local-host.ts';
import { kvmHostConfigOf, kvmTestHost, removeDomainAndVolumes, type KvmTestHost } from '../support/kvm-host.ts';
import type { ProviderHarness } from './conformance.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);
const RUN_ID = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
const sig = (): AbortSignal => AbortSignal.timeout(60_000);
/** Longer than any path component a file system accepts, and than the message limit. */
const TOO_LONG = 'x'.repeat(2000);

function deps(registry = new Registry()): ProviderDeps {
  return { logger: silentLogger(), registry, dataDir: '/nonexistent' };
}

function namer(): (what: string) => string {
  let seq = 0;
  return (what) => `ct-${RUN_ID}-${what}-${++seq}`;
}

/** Closes the providers a test built (after its instances are gone). */
class Built {
  readonly providers: Provider[] = [];
  add<P extends Provider>(p: P): P {
    this.providers.push(p);
    return p;
  }
  async close(): Promise<void> {
    for (const p of this.providers.splice(0)) await p.close();
  }
}

/** Deletes every instance `p` lists for the fleets the test used. */
async function deleteListed(p: Provider | undefined, fleets: Iterable<string>, placement?: string): Promise<void> {
  if (!p?.lifecycle) return;
  for (const fleet of fleets) {
    for await (const i of p.lifecycle.listInstances(fleet, sig()))
      await p.lifecycle.deleteInstance(i.name, i.placement ?? placement, { owner: i.owner, nameIsOurs: true }, sig());
  }
}

export function localHarness(): ProviderHarness {
  let base: string;
  let dataDir: string;
  let current: Provider | undefined;
  const built = new Built();
  const uniqueName = namer();
  const fleets = new Set<string>();
  const track = (what: string): string => {
    const name = uniqueName(what);
    if (what === 'fleet') fleets.add(name);
    return name;
  };
  return {
    type: 'local',
    targets: ['localhost'],
    placement: undefined,
    uniqueName: track,
    setUp: async () => {
      base = await mkdtemp(join(tmpdir(), 'egress-conformance-local-'));
    },
    beforeEach: async () => {
      dataDir = join(base, uniqueName('data'));
      current = undefined;
    },
    afterEach: async () => {
      await deleteListed(current, fleets);
      fleets.clear();
      await built.close();
      const left = await readdir(join(dataDir, 'instances')).catch(() => [] as string[]);
      for (const name of left) if ((await findProxyProcesses(instanceDir(dataDir, name))).length > 0) throw new Error(`local proxy ${name} still running`);
      // The proxy host stops with its last proxy.
      await waitFor('the local proxy host to stop', async () => (await findHostProcesses(dataDir)).length === 0);
    },
    tearDown: async () => {
      await rm(base, { recursive: true, force: true });
    },
    provider: async () => (current = built.add(await createProvider(localProviderSchema.parse({ name: 'local', type: 'local', dataDir }), deps()))),
    // A data directory whose name no file system accepts: the check's message carries it.
    longMessageProvider: async () =>
      built.add(await createProvider(localProviderSchema.parse({ name: 'local', type: 'local', dataDir: join(base, TOO_LONG) }), deps())),
    // A listener the proxy host serves for it, or a proxy process of the earlier model.
    backendObjects: async (name) => [
      ...(await servedByHost(dataDir, sig())).filter((served) => served === name).map((served) => `listener ${served}`),
      ...(await findProxyProcesses(instanceDir(dataDir, name))).map((pid) => `process ${pid}`),
    ],
    // A directory under instances/ without our intent file, and a plain file beside it: someone else's files.
    seedForeign: async (name) => {
      const dir = instanceDir(dataDir, name);
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'instance.json'), '{}');
      await writeFile(join(dir, 'notes.txt'), 'not an instance');
      await writeFile(`${dir}.txt`, 'not an instance either');
    },
    foreignExists: async (name) => {
      const dir = instanceDir(dataDir, name);
      return (await Promise.all([stat(join(dir, 'notes.txt')), stat(`${dir}.txt`)]).catch(() => undefined)) !== undefined;
    },
  };
}

/**
 * The upstream provider: fronts in the local proxy host, forwarding to a vendor — here our own
 * forward proxy with Basic auth on loopback (the suites against tinyproxy, squid and dante are
 * upstream-provider-e2e.test.ts) — and checked through it to an echo. The provider is named
 * `proxy` and every name the suite asks for is listed in its endpoints file, so the suite's
 * proxies (`proxy-<name>`) are exactly its endpoints' (`<provider>-<endpoint>`).
 */
export function upstreamHarness(): ProviderHarness {
  let base: string;
  let dataDir: string;
  let endpointsFile: string;
  let passwordFile: string;
  let vendor: ForwardProxy;
  let echo: HttpServer;
  let current: Provider | undefined;
  const built = new Built();
  const uniqueName = namer();
  const fleets = new Set<string>();
  const PASSWORD = 'conformance-vendor-pw';
  const track = (what: string): string => {
    const name = uniqueName(what).slice(0, 30);
    if (what === 'fleet') fleets.add(name);
    // Listed before the name is used (synchronously: the suite ensures it next).
    else appendFileSync(endpointsFile, `${name} http://vendor@127.0.0.1:${vendor.port}\n`);
    return name;
  };
  const build = async (endpointPasswordFile: string): Promise<Provider> => {
    const echoPort = (echo.address() as AddressInfo).port;
    return createProvider(
      upstreamProviderSchema.parse({
        name: 'proxy',
        type: 'upstream',
        dataDir,
        passwordFile,
        endpoints: [{ name: 'e1', url: `http://vendor@127.0.0.1:${vendor.port}`, passwordFile: endpointPasswordFile }],
        endpointsFile,
      }),
      { ...deps(), egress: { guarded: [], echo: { host: '127.0.0.1', port: echoPort, path: '/v1/echo' } } },
    );
  };
  return {
    type: 'upstream',
    targets: ['e1'],
    placement: undefined,
    uniqueName: track,
    setUp: async () => {
      base = await mkdtemp(join(tmpdir(), 'egress-conformance-upstream-'));
      passwordFile = join(base, 'vendor-password');
      await writeFile(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
      vendor = await listenForwardProxy({
        host: '127.0.0.1',
        port: 0,
        admit: (c) =>
          Promise.resolve(
            c?.username === 'vendor' && c.password === PASSWORD ? { allowed: true } : { allowed: false, status: 407, message: 'vendor credentials required' },
          ),
        generation: () => 1,
        maxConnections: 64,
        headersTimeoutMs: 10_000,
        keepAliveTimeoutMs: 5_000,
      });
      echo = createHttpServer((req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ address: req.socket.remoteAddress }));
      });
      echo.listen(0, '127.0.0.1');
      await once(echo, 'listening');
    },
    beforeEach: async () => {
      dataDir = join(base, uniqueName('data'));
      endpointsFile = join(base, uniqueName('endpoints'));
      await writeFile(endpointsFile, '');
      current = undefined;
    },
    afterEach: async () => {
      await deleteListed(current, fleets);
      fleets.clear();
      await built.close();
      await waitFor('the proxy host to stop', async () => (await findHostProcesses(dataDir)).length === 0);
    },
    tearDown: async () => {
      await vendor?.close();
      echo?.closeAllConnections();
      await new Promise((resolve) => echo?.close(resolve));
      await rm(base, { recursive: true, force: true });
    },
    provider: async () => (current = built.add(await build(passwordFile))),
    // A password file whose name no file system accepts: the check's message carries it.
    longMessageProvider: async () => built.add(await build(join(base, TOO_LONG))),
    backendObjects: async (name) => (await servedByHost(dataDir, sig())).filter((served) => served === name).map((served) => `listener ${served}`),
    seedForeign: async (name) => {
      const dir = instanceDir(dataDir, name);
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'instance.json'), '{}');
      await writeFile(join(dir, 'notes.txt'), 'not an instance');
    },
    foreignExists: async (name) => (await stat(join(instanceDir(dataDir, name), 'notes.txt')).catch(() => undefined)) !== undefined,
  };
}

export function kvmHarness(): ProviderHarness {
  let testHost: KvmTestHost;
  let host: KvmHostConfig;
  let baseVolume: string;
  /** A provider of its own for looking at the host, so the tests' providers are untouched by it. */
  let inspector: KvmProvider;
  const built = new Built();
  const registries = new Map<Provider, Registry>();
  const uniqueName = namer();
  const names = new Set<string>();
  const fleets = new Set<string>();
  const track = (what: string): string => {
    const name = uniqueName(what);
    (what === 'fleet' ? fleets : names).add(name);
    return name;
  };
  const lib = <T>(fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> =>
    inspector.pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());
  const volumesOf = (name: string): Promise<string[]> =>
    lib(async (c, s) =>
      (await c.storagePoolListAllVolumes(await c.storagePoolLookupByName(host.pool, s), s)).map((v) => v.name).filter((n) => n === `${name}.qcow2`),
    );
  const build = (hostConfig: KvmHostConfig): KvmProvider => {
    const registry = new Registry();
    const config = kvmProviderSchema.parse({
      name: 'kvm',
      type: 'kvm',
      hosts: [hostConfig],
      proxies: { baseImageVolume: baseVolume, memoryMiB: 64, domainType: 'qemu' },
    });
    const p = built.add(createKvmProvider(config, deps(registry)));
    registries.set(p, registry);
    return p;
  };
  let current: KvmProvider | undefined;
  return {
    type: 'kvm',
    targets: ['kvm-conformance'],
    get placement() {
      return host.name;
    },
    uniqueName: track,
    setUp: async () => {
      testHost = await kvmTestHost();
      host = kvmHostConfigOf(testHost, 'kvm-conformance');
      inspector = createKvmProvider(kvmProviderSchema.parse({ name: 'kvm-inspector', type: 'kvm', hosts: [host] }), deps());
      baseVolume = `${uniqueName('base')}.qcow2`;
      await run('qemu-img', ['create', '-q', '-f', 'qcow2', join(testHost.poolDir, baseVolume), '16M']);
      await lib(async (c, s) => c.storagePoolRefresh(await c.storagePoolLookupByName(host.pool, s), s));
    },
    beforeEach: async () => {
      current = undefined;
    },
    afterEach: async () => {
      await deleteListed(current, fleets, host.name);
      fleets.clear();
      await built.close();
      // Whatever is left under a name of this test (a foreign domain, an instance a failed test left).
      for (const name of names) {
        await lib((c, s) => removeDomainAndVolumes(c, s, host.pool, name));
      }
      names.clear();
    },
    tearDown: async () => {
      if (!inspector) return;
      if (baseVolume) {
        await lib(async (c, s) => {
          const vol = await orUndefined(c.storageVolLookupByName(await c.storagePoolLookupByName(host.pool, s), baseVolume, s));
          if (vol) await c.storageVolDelete(vol, 0, s);
        });
      }
      await inspector.close();
    },
    provider: async () => (current = build(host)),
    // A private key path no file system accepts: SSHMaterialUnavailable names it.
    longMessageProvider: async () => build({ ...host, privateKeyFile: `/nonexistent/${TOO_LONG}` }),
    backendObjects: async (name) => {
      const domain = await lib(async (c, s) => {
        const dom = await orUndefined(c.domainLookupByName(name, s));
        return dom ? `domain ${dom.name} ${dom.uuid.toString('hex')}` : undefined;
      });
      return [...(domain ? [domain] : []), ...(await volumesOf(name)).map((v) => `volume ${v}`)];
    },
    // A domain defined directly, without our metadata tag: someone else's guest on the host.
    seedForeign: async (name) => {
      await lib((c, s) =>
        c.domainDefineXml(
          `<domain type='qemu'><name>${name}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>` +
            `<os><type arch='x86_64' machine='pc'>hvm</type></os><devices><graphics type='vnc' listen='127.0.0.1'/></devices></domain>`,
          0,
          s,
        ),
      );
    },
    foreignExists: (name) =>
      lib(async (c, s) => {
        try {
          await c.domainLookupByName(name, s);
          return true;
        } catch (err) {
          if (isLibvirtNotFound(err)) return false;
          throw err;
        }
      }),
    // Dials of the providers built so far (a closed provider must not dial).
    requests: async () => {
      let total = 0;
      for (const registry of registries.values()) {
        const metric = await registry.getSingleMetric('proxy_operator_kvm_dials_total')?.get();
        for (const v of metric?.values ?? []) total += v.value;
      }
      return total;
    },
  };
}

export function kubernetesHarness(): ProviderHarness {
  let kube: FakeKubeApiserver;
  const built = new Built();
  const config = (): Parameters<typeof createKubernetesProvider>[0] =>
    kubernetesProviderSchema.parse({ name: 'k8s', type: 'kubernetes', server: kube.url, skipTLSVerify: true, namespace: 'proxies', proxies: {} });
  const build = (): Provider => built.add(createKubernetesProvider(config(), deps(), { kubeConfig: kube.kubeConfig() }));
  return {
    type: 'kubernetes',
    targets: ['apiserver'],
    placement: undefined,
    uniqueName: namer(),
    setUp: async () => undefined,
    beforeEach: async () => {
      kube = await startFakeKubeApiserver();
      kube.store.namespaces.add('proxies');
    },
    afterEach: async () => {
      await built.close();
      await kube.close();
    },
    tearDown: async () => undefined,
    provider: async () => build(),
    longMessageProvider: async () => {
      kube.injectFault({ status: 403, message: TOO_LONG });
      return build();
    },
    backendObjects: async (name) => [
      ...kube
        .listPods('proxies')
        .filter((p) => p.metadata.name === name)
        .map((p) => `pod ${p.metadata.name} ${p.metadata.uid}`),
      ...kube
        .listSecrets('proxies')
        .filter((s) => s.metadata.name === name)
        .map((s) => `secret ${s.metadata.name} ${String(s.metadata.resourceVersion)}`),
      ...kube
        .listServices('proxies')
        .filter((s) => s.metadata.name === name)
        .map((s) => `service ${s.metadata.name} ${String(s.metadata.resourceVersion)}`),
    ],
    // A Pod of that name without our labels.
    seedForeign: async (name) => {
      kube.seedPod({ metadata: { name, namespace: 'proxies', labels: { app: 'egress-proxy' } } });
    },
    foreignExists: async (name) => kube.getPod('proxies', name) !== undefined,
    requests: async () => kube.requests.length,
    writes: () => kube.requests.filter((r) => r.method !== 'GET').length,
  };
}

export function gcpHarness(): ProviderHarness {
  const ZONE = 'us-central1-a';
  let compute: FakeCompute;
  const built = new Built();
  const build = (): Provider => {
    const auth = new OAuth2Client();
    auth.setCredentials({ access_token: 'good-token', expiry_date: Date.now() + 3_600_000 });
    const config = gcpProviderSchema.parse({
      name: 'gce',
      type: 'gcp',
      project: 'egress-test',
      zone: ZONE,
      ...compute.clientOptions(),
      proxies: { image: 'projects/egress-images/global/images/family/forward-proxy' },
    });
    // The provider owns (and closes) the clients it is given.
    return built.add(createGcpProvider(config, deps(), { clients: createComputeClients({ ...compute.clientOptions(), authClient: auth }) }));
  };
  return {
    type: 'gcp',
    targets: ['compute'],
    placement: undefined,
    uniqueName: namer(),
    setUp: async () => undefined,
    beforeEach: async () => {
      compute = await startFakeCompute({ project: 'egress-test', tokens: ['good-token'] });
    },
    afterEach: async () => {
      await built.close();
      await compute.close();
    },
    tearDown: async () => undefined,
    provider: async () => build(),
    longMessageProvider: async () => {
      compute.injectFault({ status: 403, message: TOO_LONG });
      return build();
    },
    backendObjects: async (name) =>
      compute
        .listInstances()
        .filter((i) => i.name === name)
        .map((i) => `instance ${i.zone} ${i.name} ${i.id}`),
    // An instance of that name without our labels.
    seedForeign: async (name) => {
      compute.seedInstance(ZONE, { name, labels: { team: 'web' } });
    },
    foreignExists: async (name) => compute.getInstance(ZONE, name) !== undefined,
    requests: async () => compute.requests.length,
    writes: () => compute.requests.filter((r) => r.method !== 'GET').length,
  };
}
