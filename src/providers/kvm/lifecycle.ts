/**
 * The KVM side of the proxy lifecycle: a proxy is a libvirt domain on one of the provider's
 * hosts (`placement` = the host's name, host-placement.ts), its disk a qcow2 volume `<name>.qcow2`
 * in the host's pool made from the base image volume. Ownership is a metadata element in our
 * namespace, written by the very define that makes the domain; a domain without it is never touched.
 * The provider's egress policy document goes in at define time as the SMBIOS OEM string
 * `egress.proxy.policy=<JSON>`; an existing domain is never redefined for it (a change applies to
 * domains defined after it: docs/kvm-provider.md#egress-policy).
 * All work goes through the host pool's `call` (an abort drops the connection). The paths on one
 * connection: ensure-domain.ts, delete-domain.ts, read-domains.ts; error mapping: provisioning-errors.ts.
 */
import { toError } from '../../errors.ts';
import { redactError } from '../../secrets/redact-error.ts';
import { NO_REDACTION, type Redactor } from '../../secrets/secret-registry.ts';
import type { HostConnection } from '../../kvm/host-connection.ts';
import type { LibvirtConnection } from '../../kvm/libvirt/index.ts';
import type { KvmHostPool } from '../../kvm/pool/index.ts';
import type { ProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Logger } from '../../logging.ts';
import type { Instance, ProxyLifecycle } from '../lifecycle.ts';
import { policyDocument } from '../policy-document.ts';
import type { KvmHostConfig } from './config.ts';
import { bootVolumeNamer, type KernelFiles } from './boot-files.ts';
import { parsePortRange, type GuestForward } from './port-forward.ts';
import { DEFAULT_DOMAIN_TEMPLATE, REQUIRED_PLACEHOLDERS } from './domain-xml.ts';
import { deleteOwnDomain } from './delete-domain.ts';
import { ensureDomain, type DomainSettings } from './ensure-domain.ts';
import { hostPlacement } from './host-placement.ts';
import { provisioningErrorOf } from './provisioning-errors.ts';
import { fleetInstances, taggedInstance } from './read-domains.ts';

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

/** The options with their defaults applied; TypeError for a template or port range that can never work. */
function domainSettings(options: KvmLifecycleOptions, egressPolicy: ProxyEgressPolicy | undefined): DomainSettings {
  const template = options.domainTemplate ?? DEFAULT_DOMAIN_TEMPLATE;
  for (const p of REQUIRED_PLACEHOLDERS) {
    if (!template.includes(`{{${p}}}`)) throw new TypeError(`domainTemplate: missing the {{${p}}} placeholder`);
  }
  const forward = options.portForward;
  const range = forward ? parsePortRange(forward.ports) : undefined;
  if (forward && !range) throw new TypeError(`portForward.ports: "${forward.ports}" is not PORT or FIRST-LAST`);
  return {
    template,
    src: {
      baseImageVolume: options.baseImageVolume,
      baseImageFormat: options.baseImageFormat ?? 'qcow2',
      baseImageFile: options.baseImageFile,
      cloneMode: options.cloneMode ?? 'overlay',
    },
    port: options.proxyPort ?? 3128,
    policy: policyDocument(egressPolicy),
    memoryMiB: options.memoryMiB ?? 256,
    vcpus: options.vcpus ?? 1,
    network: options.network,
    domainType: options.domainType ?? 'kvm',
    bootUserData: options.bootUserData ?? false,
    kernel: options.kernel,
    bootVolumeName: bootVolumeNamer(),
    forward: forward && range ? { ...forward, range } : undefined,
  };
}

export function createKvmLifecycle(deps: KvmLifecycleDeps): ProxyLifecycle {
  const { pool, hosts } = deps;
  const log = deps.logger.child({ component: 'kvm-lifecycle' });
  const secrets = deps.secrets ?? NO_REDACTION;
  if (hosts.length === 0) throw new TypeError('createKvmLifecycle: no hosts');
  const settings = domainSettings(deps.options, deps.egressPolicy);
  const { port } = settings;
  const forwarded = settings.forward !== undefined;
  const placement = hostPlacement(hosts);

  async function run<T>(host: KvmHostConfig, what: string, fn: (c: LibvirtConnection, s: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T> {
    try {
      return await pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), signal);
    } catch (err) {
      throw provisioningErrorOf(err, `${what} on KVM host "${host.name}"`);
    }
  }

  return {
    async ensureInstance(spec, signal) {
      const host = placement.forInstance(spec.name, spec.placement);
      try {
        return await run(host, `ensuring instance "${spec.name}"`, (c, s) => ensureDomain(settings, c, host, spec, log, s), signal);
      } catch (err) {
        // libvirt quotes what it refused: a define's parse error the XML line with the SMBIOS strings, a
        // start error QEMU's command line. Whatever step failed, the error leaves redacted (src/secrets).
        throw redactError(err, secrets);
      }
    },

    async getInstance(name, where, signal) {
      for (const host of placement.candidates(where)) {
        const found = await run(host, `reading instance "${name}"`, (c, s) => taggedInstance(c, name, host.name, port, forwarded, s), signal);
        if (found) return found;
      }
      return undefined;
    },

    async deleteInstance(name, where, target, signal) {
      for (const host of placement.candidates(where)) {
        await run(host, `deleting instance "${name}"`, (c, s) => deleteOwnDomain(c, host, name, target, log, s), signal);
      }
    },

    async *listInstances(fleet, signal) {
      let firstError: Error | undefined;
      for (const host of hosts) {
        let batch: Instance[];
        try {
          batch = await run(host, 'listing instances', (c, s) => fleetInstances(c, fleet, host.name, s), signal);
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
