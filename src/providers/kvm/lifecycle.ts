/**
 * The KVM side of the proxy lifecycle: a proxy is a libvirt domain on one of the provider's
 * hosts (`placement` = the host's name), its disk a qcow2 volume `<name>.qcow2` in the host's
 * pool made from the base image volume. Ownership is a metadata element in our namespace,
 * written by the very define that makes the domain; a domain without it is never touched.
 * The provider's egress policy document goes in at define time as the SMBIOS OEM string
 * `egress.proxy.policy=<JSON>`; an existing domain is never redefined for it (a change applies to
 * domains defined after it: docs/kvm-provider.md#egress-policy).
 * All work goes through the host pool's `call` (an abort drops the connection).
 */
import { EgressError, toError } from '../../errors.ts';
import { redactError } from '../../secrets/redact-error.ts';
import { NO_REDACTION, type Redactor } from '../../secrets/secret-registry.ts';
import type { HostConnection } from '../../kvm/host-connection.ts';
import { DomainState, LibvirtError, isLibvirtExists, isLibvirtUnsupported, type DomainRef, type LibvirtConnection } from '../../kvm/libvirt/index.ts';
import type { KvmHostPool } from '../../kvm/pool/index.ts';
import { proxyEgressPolicy, type ProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Logger } from '../../logging.ts';
import { ForeignInstanceError, foreignOwner, ProvisioningError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../lifecycle.ts';
import type { KvmHostConfig } from './config.ts';
import { seedImage, seedVolumeName, writeSeed } from './seed.ts';
import { bootVolumeNamer, ensureKernelFiles, type KernelFiles } from './boot-files.ts';
import { choosePort, forwardOf, isForwardPortTaken, parsePortRange, qemuCommandline, type GuestForward } from './port-forward.ts';
import { DEFAULT_DOMAIN_TEMPLATE, REQUIRED_PLACEHOLDERS, domainXml, type DomainTag } from './domain-xml.ts';
import {
  deleteVolume,
  describe,
  ensureVolume,
  findDomain,
  readTag,
  removeDomain,
  start,
  volumeName,
  type FoundDomain,
  type VolumeSource,
} from './lifecycle-ops.ts';

export { EGRESS_METADATA_URI, EGRESS_METADATA_KEY, DEFAULT_DOMAIN_TEMPLATE, OEM_POLICY_PREFIX } from './domain-xml.ts';
export { BaseImageBusyError } from './lifecycle-ops.ts';

/** Lifecycle settings (candidates for the provider's config; see docs/kvm-provider.md). */
export interface KvmLifecycleOptions {
  /** Base image volume in each host's pool that proxy volumes are made from. */
  baseImageVolume: string;
  /** Its format; default `qcow2`. */
  baseImageFormat?: string;
  /** A local image file uploaded as `baseImageVolume` when a host's pool lacks it. */
  baseImageFile?: string;
  /** `overlay` (default): a qcow2 overlay backed by the base; `copy`: a full clone. */
  cloneMode?: 'overlay' | 'copy';
  /** Domain XML with `{{name}}`, `{{metadata}}`, `{{disk}}` and optionally `{{memoryMiB}}`, `{{vcpus}}`, `{{sysinfo}}`, `{{smbios}}`, `{{interface}}`. */
  domainTemplate?: string;
  /** Default 256. */
  memoryMiB?: number;
  /** Default 1. */
  vcpus?: number;
  /** libvirt network for the NIC; unset = user-mode networking. */
  network?: string;
  /** Port the forward proxy listens on in the guest; default 3128. */
  proxyPort?: number;
  /**
   * Attach a cloud-init NoCloud seed (`<name>.seed.iso`, uploaded to the pool) whose user-data installs and
   * starts the proxy on a stock Debian 12 base image (seed.ts). Default false here; the provider's
   * configuration (`proxies.bootUserData`) defaults it to true.
   */
  bootUserData?: boolean;
  /** `kvm` (default) or `qemu` (TCG). */
  domainType?: 'kvm' | 'qemu';
  /** Direct kernel boot; the files are uploaded to each host's pool (boot-files.ts). */
  kernel?: KernelFiles;
  /** User-mode networking with a host port per proxy from `ports` (port-forward.ts). */
  portForward?: { address: string; ports: string; guestForwards: readonly GuestForward[]; network?: string };
}

export interface KvmLifecycleDeps {
  pool: KvmHostPool;
  hosts: KvmHostConfig[];
  logger: Logger;
  options: KvmLifecycleOptions;
  /** The document every proxy receives (`proxyEgressPolicy` of the provider's config); default: the default deny alone. */
  egressPolicy?: ProxyEgressPolicy;
  /** The process's secret registry: the errors of `ensureInstance` pass its redaction (it knows the proxy's credentials). */
  secrets?: Redactor;
}

/** libvirt numbers that mean "this request can never work as written". */
const PROVISIONING_CODES = new Set<number>([
  8, // INVALID_ARG
  27, // XML_ERROR
  35, // XML_DETAIL (malformed XML, as libvirtd 9 reports it)
  67, // CONFIG_UNSUPPORTED
  91, // CPU_INCOMPATIBLE
  92, // XML_INVALID_SCHEMA
]);

/** Errors a retry cannot fix become ProvisioningError; everything else (connection loss included) propagates. */
function mapError(err: unknown, what: string): unknown {
  if (err instanceof ProvisioningError) return err;
  if (err instanceof LibvirtError && (isLibvirtUnsupported(err) || PROVISIONING_CODES.has(err.libvirtCode))) {
    return new ProvisioningError(`${what}: ${err.libvirtMessage || err.message}`, { cause: err });
  }
  return err;
}

/** A stable host for a name when the spec has no placement (FNV-1a). */
function hashIndex(name: string, n: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return (h >>> 0) % n;
}

export function createKvmLifecycle(deps: KvmLifecycleDeps): ProxyLifecycle {
  const { pool, hosts, options } = deps;
  const log = deps.logger.child({ component: 'kvm-lifecycle' });
  const secrets = deps.secrets ?? NO_REDACTION;
  if (hosts.length === 0) throw new TypeError('createKvmLifecycle: no hosts');
  const template = options.domainTemplate ?? DEFAULT_DOMAIN_TEMPLATE;
  for (const p of REQUIRED_PLACEHOLDERS) {
    if (!template.includes(`{{${p}}}`)) throw new TypeError(`domainTemplate: missing the {{${p}}} placeholder`);
  }
  const src: VolumeSource = {
    baseImageVolume: options.baseImageVolume,
    baseImageFormat: options.baseImageFormat ?? 'qcow2',
    baseImageFile: options.baseImageFile,
    cloneMode: options.cloneMode ?? 'overlay',
  };
  const port = options.proxyPort ?? 3128;
  const policy = JSON.stringify(deps.egressPolicy ?? proxyEgressPolicy(undefined, undefined));
  const forward = options.portForward;
  const forwardRange = forward ? parsePortRange(forward.ports) : undefined;
  if (forward && !forwardRange) throw new TypeError(`portForward.ports: "${forward.ports}" is not PORT or FIRST-LAST`);
  const bootVolumeName = bootVolumeNamer();
  /** How many times a define moves to another port when its start finds the port taken. */
  const PORT_RETRIES = 5;

  /** The host ports the host's domains hold for `address` (from their XML: it survives restarts, and an undefine frees it). */
  async function heldPorts(c: LibvirtConnection, address: string, signal: AbortSignal): Promise<Set<number>> {
    const held = new Set<number>();
    for (const dom of await c.listAllDomains(0, signal)) {
      const xml = await c.domainGetXmlDesc(dom, 0, signal).catch((err: unknown) => {
        if (err instanceof LibvirtError && err.kind === 'not-found') return '';
        throw err;
      });
      const f = forwardOf(xml);
      if (f && f.host === address) held.add(f.port);
    }
    return held;
  }

  const hostNamed = (placement: string): KvmHostConfig => {
    const host = hosts.find((h) => h.name === placement);
    if (!host) throw new ProvisioningError(`unknown KVM host "${placement}" (hosts: ${hosts.map((h) => h.name).join(', ')})`);
    return host;
  };
  const hostsFor = (placement: string | undefined): KvmHostConfig[] => (placement === undefined ? hosts : [hostNamed(placement)]);

  async function run<T>(host: KvmHostConfig, what: string, fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T> {
    try {
      return await pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), signal);
    } catch (err) {
      throw mapError(err, `${what} on KVM host "${host.name}"`);
    }
  }

  function conflict(name: string, host: KvmHostConfig, found: FoundDomain, spec?: InstanceSpec): ProvisioningError {
    if (!found.tag) {
      return new ProvisioningError(`a domain named "${name}" exists on KVM host "${host.name}" without our ownership tag; it is left alone`);
    }
    return new ProvisioningError(
      `domain "${name}" on KVM host "${host.name}" belongs to proxy "${found.tag.proxy}" of fleet "${found.tag.fleet}", not "${spec?.owner.proxy}" of "${spec?.owner.fleet}"`,
    );
  }

  /** Starts a domain; false when its forward's host port turned out taken (the domain is then removed, to be defined on another). */
  async function startHoldingPort(c: LibvirtConnection, dom: DomainRef, signal: AbortSignal): Promise<boolean> {
    try {
      await start(c, dom, signal);
      return true;
    } catch (err) {
      if (!forward || !(err instanceof LibvirtError) || !isForwardPortTaken(err.libvirtMessage || err.message)) throw err;
      await removeDomain(c, dom, signal);
      return false;
    }
  }

  async function ensureOn(c: LibvirtConnection, host: KvmHostConfig, spec: InstanceSpec, signal: AbortSignal): Promise<Instance> {
    const hlog = log.child({ host: host.name, instance: spec.name });
    const describeHere = (dom: DomainRef, tag: DomainTag): Promise<Instance> => describe(c, { dom, tag }, host.name, port, signal, forward !== undefined);
    /** The existing domain, started if it is not; undefined when its start found the forward's port taken and it was removed. */
    const owned = async (found: FoundDomain): Promise<Instance | undefined> => {
      const tag = found.tag;
      if (!tag || tag.fleet !== spec.owner.fleet || tag.proxy !== spec.owner.proxy) throw conflict(spec.name, host, found, spec);
      // Intent recorded, start lost (a crash or a lost connection between define and create): finish it.
      if ((await c.domainGetState(found.dom, signal)).state === DomainState.SHUTOFF) {
        hlog.info('starting defined proxy domain');
        if (!(await startHoldingPort(c, found.dom, signal))) {
          hlog.warn('its forwarded host port is taken; defining it again on another');
          return undefined;
        }
      }
      return describeHere(found.dom, tag);
    };

    const existing = await findDomain(c, spec.name, signal);
    const again = existing ? await owned(existing) : undefined;
    if (again) return again;

    const storagePool = await c.storagePoolLookupByName(host.pool, signal);
    const volume = volumeName(spec.name);
    const { created } = await ensureVolume(c, storagePool, volume, src, hlog, signal);
    const seed = options.bootUserData ? seedVolumeName(spec.name) : undefined;
    if (seed) {
      try {
        await writeSeed(c, storagePool, seed, await seedImage(spec, port, policy), signal);
      } catch (err) {
        // A concurrent ensure of this instance got further (defined and started its domain on this seed) meanwhile: continue from what it made.
        const raced = await findDomain(c, spec.name, signal).catch(() => undefined);
        const instance = raced ? await owned(raced) : undefined;
        if (instance) return instance;
        throw err;
      }
      hlog.info({ volume: seed }, 'cloud-init seed volume written');
    }
    const kernel = options.kernel ? await ensureKernelFiles(c, storagePool, options.kernel, bootVolumeName, hlog, signal) : undefined;
    const avoid = new Set<number>();
    for (let attempt = 0; ; attempt++) {
      let commandline: string | undefined;
      if (forward && forwardRange) {
        const hostPort = choosePort(forwardRange, spec.name, await heldPorts(c, forward.address, signal), avoid);
        if (hostPort === undefined) {
          throw new EgressError('ERR_KVM_NO_FREE_PORT', `no free port in portForward.ports "${forward.ports}" on KVM host "${host.name}"`, { retryable: true });
        }
        commandline = qemuCommandline({
          address: forward.address,
          hostPort,
          guestPort: port,
          guestForwards: forward.guestForwards,
          ...(forward.network ? { network: forward.network } : {}),
        });
        avoid.add(hostPort);
      }
      const tag = { fleet: spec.owner.fleet, proxy: spec.owner.proxy, createdAt: new Date().toISOString() };
      const xml = domainXml({
        name: spec.name,
        tag,
        credentials: spec.credentials,
        policy,
        memoryMiB: options.memoryMiB ?? 256,
        vcpus: options.vcpus ?? 1,
        pool: host.pool,
        volume,
        network: options.network,
        template,
        domainType: options.domainType ?? 'kvm',
        ...(seed ? { seedVolume: seed } : {}),
        ...(kernel ? { kernel } : {}),
        ...(commandline ? { qemuCommandline: commandline } : {}),
      });
      let dom;
      try {
        dom = await c.domainDefineXml(xml, 0, signal);
      } catch (err) {
        // A concurrent ensure of the same name defined it first: continue from what it made.
        if (isLibvirtExists(err)) {
          const raced = await findDomain(c, spec.name, signal);
          const instance = raced ? await owned(raced) : undefined;
          if (instance) return instance;
        }
        const mapped = mapError(err, `defining domain "${spec.name}" on KVM host "${host.name}"`);
        // A definition that can never work leaves no volume behind (it is ours: we just made it).
        if (mapped instanceof ProvisioningError && created) await deleteVolume(c, storagePool, volume, signal).catch(() => undefined);
        if (mapped instanceof ProvisioningError && seed) await deleteVolume(c, storagePool, seed, signal).catch(() => undefined);
        throw mapped;
      }
      hlog.info({ volume, created }, 'proxy domain defined');
      if (await startHoldingPort(c, dom, signal)) return describeHere(dom, tag);
      if (attempt + 1 >= PORT_RETRIES) {
        throw new EgressError('ERR_KVM_NO_FREE_PORT', `the forwarded ports tried on KVM host "${host.name}" were all taken (${[...avoid].join(', ')})`, {
          retryable: true,
        });
      }
      hlog.warn({ tried: [...avoid] }, 'forwarded host port taken at start; defining the domain on another');
    }
  }

  return {
    async ensureInstance(spec, signal) {
      const host = spec.placement !== undefined ? hostNamed(spec.placement) : hosts[hashIndex(spec.name, hosts.length)]!;
      try {
        return await run(host, `ensuring instance "${spec.name}"`, (c, s) => ensureOn(c, host, spec, s), signal);
      } catch (err) {
        // libvirt quotes what it refused: a define's parse error the XML line with the SMBIOS strings, a
        // start error QEMU's command line. Whatever step failed, the error leaves redacted (src/secrets).
        throw redactError(err, secrets);
      }
    },

    async getInstance(name, placement, signal) {
      for (const host of hostsFor(placement)) {
        const found = await run(
          host,
          `reading instance "${name}"`,
          async (c, s) => {
            const f = await findDomain(c, name, s);
            return f?.tag ? describe(c, { dom: f.dom, tag: f.tag }, host.name, port, s, forward !== undefined) : undefined;
          },
          signal,
        );
        if (found) return found;
      }
      return undefined;
    },

    async deleteInstance(name, placement, { owner, nameIsOurs }, signal) {
      for (const host of hostsFor(placement)) {
        await run(
          host,
          `deleting instance "${name}"`,
          async (c, s) => {
            const hlog = log.child({ host: host.name, instance: name });
            const found = await findDomain(c, name, s);
            const foreign = found ? foreignOwner(found.tag, owner) : undefined;
            if (foreign) {
              hlog.warn({ reason: foreign }, 'domain is not ours; not deleting it or its volumes');
              throw new ForeignInstanceError(name, `domain on host "${host.name}": ${foreign}`);
            }
            // Volumes carry no owner of their own: they go with the tagged domain that owned them, or —
            // a crashed create's leftovers, with no domain — by a name the caller derived itself (never
            // by a name an inventory answered: the domain may have been another fleet's all along).
            if (!found && !nameIsOurs) {
              hlog.info('domain already gone; its volumes are left to the reconcile of their proxy');
              return;
            }
            if (found) await removeDomain(c, found.dom, s);
            const storagePool = await c.storagePoolLookupByName(host.pool, s);
            const removed = await deleteVolume(c, storagePool, volumeName(name), s);
            // The seed too, whether or not this lifecycle writes seeds (the setting may have changed since).
            const seedRemoved = await deleteVolume(c, storagePool, seedVolumeName(name), s);
            if (found || removed || seedRemoved) hlog.info({ domain: Boolean(found), volume: removed, seed: seedRemoved }, 'proxy instance deleted');
          },
          signal,
        );
      }
    },

    async *listInstances(fleet, signal) {
      let firstError: Error | undefined;
      for (const host of hosts) {
        let batch: Instance[];
        try {
          batch = await run(
            host,
            'listing instances',
            async (c, s) => {
              // All domains at once: the client keeps 4 calls in flight and queues the rest in order.
              const all = await Promise.all(
                (await c.listAllDomains(0, s)).map(async (dom): Promise<Instance | undefined> => {
                  const tag = await readTag(c, dom, s);
                  if (!tag || tag.fleet !== fleet) return undefined;
                  try {
                    return await describe(c, { dom, tag }, host.name, undefined, s);
                  } catch (err) {
                    // Undefined between the list and the read: gone, nothing to report.
                    if (err instanceof LibvirtError && err.kind === 'not-found') return undefined;
                    throw err;
                  }
                }),
              );
              return all.filter((i): i is Instance => i !== undefined);
            },
            signal,
          );
        } catch (err) {
          // One unreachable host must not hide the others' instances; the sweep still fails at the end.
          firstError ??= toError(err);
          log.warn({ host: host.name, err }, 'listing instances failed on a KVM host');
          continue;
        }
        yield* batch;
      }
      if (firstError) throw firstError;
    },
  };
}
