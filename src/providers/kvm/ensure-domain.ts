/**
 * The ensure path of the KVM lifecycle on one host's connection: an existing domain of this proxy is
 * started when it is not running; otherwise its volume (and seed) are made and the domain is defined
 * and started, on another forwarded host port when the one chosen turns out taken. Every step looks
 * up what exists first, so a crashed or concurrent ensure of the same name is continued, never doubled.
 */
import { EgressError } from '../../errors.ts';
import { DomainState, LibvirtError, isLibvirtExists, type DomainRef, type LibvirtConnection } from '../../kvm/libvirt/index.ts';
import type { Logger } from '../../logging.ts';
import { otherProxyReason, ProvisioningError, type Instance, type InstanceSpec } from '../lifecycle.ts';
import type { KvmHostConfig } from './config.ts';
import { seedImage, seedVolumeName, writeSeed } from './seed.ts';
import { ensureKernelFiles, type KernelFiles } from './boot-files.ts';
import { choosePort, forwardOf, isForwardPortTaken, qemuCommandline, type GuestForward, type PortRange } from './port-forward.ts';
import { domainXml, type DomainTag } from './domain-xml.ts';
import { deleteVolume, describe, ensureVolume, findDomain, removeDomain, start, volumeName, type FoundDomain, type VolumeSource } from './lifecycle-ops.ts';
import { provisioningErrorOf } from './provisioning-errors.ts';

/** How many times a define moves to another port when its start finds the port taken. */
const PORT_RETRIES = 5;

/** The lifecycle's options with their defaults applied (lifecycle.ts). */
export interface DomainSettings {
  template: string;
  src: VolumeSource;
  /** Port the forward proxy listens on in the guest. */
  port: number;
  /** The egress policy document (policy-document.ts). */
  policy: string;
  memoryMiB: number;
  vcpus: number;
  network: string | undefined;
  domainType: 'kvm' | 'qemu';
  bootUserData: boolean;
  kernel: KernelFiles | undefined;
  bootVolumeName: (file: string, signal: AbortSignal) => Promise<string>;
  /** User-mode networking with a host port per proxy from `range`. */
  forward: { address: string; ports: string; range: PortRange; guestForwards: readonly GuestForward[]; network?: string } | undefined;
}

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

function conflict(name: string, host: KvmHostConfig, found: FoundDomain, spec: InstanceSpec): ProvisioningError {
  if (!found.tag) {
    return new ProvisioningError(`a domain named "${name}" exists on KVM host "${host.name}" without our ownership tag; it is left alone`);
  }
  return new ProvisioningError(`domain "${name}" on KVM host "${host.name}" ${otherProxyReason(found.tag, spec.owner)}`);
}

export async function ensureDomain(
  settings: DomainSettings,
  c: LibvirtConnection,
  host: KvmHostConfig,
  spec: InstanceSpec,
  log: Logger,
  signal: AbortSignal,
): Promise<Instance> {
  const { forward, port, policy } = settings;
  const hlog = log.child({ host: host.name, instance: spec.name });
  const describeHere = (dom: DomainRef, tag: DomainTag): Promise<Instance> => describe(c, { dom, tag }, host.name, port, signal, forward !== undefined);

  /** Starts a domain; false when its forward's host port turned out taken (the domain is then removed, to be defined on another). */
  async function startHoldingPort(dom: DomainRef): Promise<boolean> {
    try {
      await start(c, dom, signal);
      return true;
    } catch (err) {
      if (!forward || !(err instanceof LibvirtError) || !isForwardPortTaken(err.libvirtMessage || err.message)) throw err;
      await removeDomain(c, dom, signal);
      return false;
    }
  }

  /** The existing domain, started if it is not; undefined when its start found the forward's port taken and it was removed. */
  const owned = async (found: FoundDomain): Promise<Instance | undefined> => {
    const tag = found.tag;
    if (!tag || otherProxyReason(tag, spec.owner)) throw conflict(spec.name, host, found, spec);
    // Intent recorded, start lost (a crash or a lost connection between define and create): finish it.
    if ((await c.domainGetState(found.dom, signal)).state === DomainState.SHUTOFF) {
      hlog.info('starting defined proxy domain');
      if (!(await startHoldingPort(found.dom))) {
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
  const { created } = await ensureVolume(c, storagePool, volume, settings.src, hlog, signal);
  const seed = settings.bootUserData ? seedVolumeName(spec.name) : undefined;
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
  const kernel = settings.kernel ? await ensureKernelFiles(c, storagePool, settings.kernel, settings.bootVolumeName, hlog, signal) : undefined;
  const avoid = new Set<number>();
  for (let attempt = 0; ; attempt++) {
    let commandline: string | undefined;
    if (forward) {
      const hostPort = choosePort(forward.range, spec.name, await heldPorts(c, forward.address, signal), avoid);
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
      memoryMiB: settings.memoryMiB,
      vcpus: settings.vcpus,
      pool: host.pool,
      volume,
      network: settings.network,
      template: settings.template,
      domainType: settings.domainType,
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
      const mapped = provisioningErrorOf(err, `defining domain "${spec.name}" on KVM host "${host.name}"`);
      // A definition that can never work leaves no volume behind (it is ours: we just made it).
      if (mapped instanceof ProvisioningError && created) await deleteVolume(c, storagePool, volume, signal).catch(() => undefined);
      if (mapped instanceof ProvisioningError && seed) await deleteVolume(c, storagePool, seed, signal).catch(() => undefined);
      throw mapped;
    }
    hlog.info({ volume, created }, 'proxy domain defined');
    if (await startHoldingPort(dom)) return describeHere(dom, tag);
    if (attempt + 1 >= PORT_RETRIES) {
      throw new EgressError('ERR_KVM_NO_FREE_PORT', `the forwarded ports tried on KVM host "${host.name}" were all taken (${[...avoid].join(', ')})`, {
        retryable: true,
      });
    }
    hlog.warn({ tried: [...avoid] }, 'forwarded host port taken at start; defining the domain on another');
  }
}
