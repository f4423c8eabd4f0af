/**
 * The gcp side of the proxy lifecycle: a proxy instance is a Compute Engine VM named after the instance
 * in zone `placement` (or the configured zone), carrying MANAGED_LABELS plus the fleet and proxy labels;
 * an instance without them is never read as ours, listed, or deleted. Inserts, starts, resumes and
 * deletes await their zone operation. With a firewall configured, the provider's rule is ensured once
 * before the first insert (firewall.ts) and every instance carries its network tag. The provider's
 * egress policy document is the metadata item `egress-proxy-policy`: set at insert, and on an existing
 * instance brought up to date with setMetadata (under the metadata fingerprint) before anything else, so
 * a stopped instance boots with the current one; an unchanged policy writes nothing. Every request is
 * cancelled when the caller's signal ends (lifecycle-calls.ts).
 * The paths: ensure-instance.ts (with revive-instance.ts for a stopped, preempted or suspended
 * instance), delete-instance.ts; error mapping: lifecycle-errors.ts. */
import type { ProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Logger } from '../../logging.ts';
import type { ProxyLifecycle } from '../lifecycle.ts';
import { policyDocument } from '../policy-document.ts';
import { DEFAULT_MAX_PAGES } from '../../clients/page-bound.ts';
import type { ComputeClients } from './clients.ts';
import { deleteOwnInstance } from './delete-instance.ts';
import { instanceEnsurer } from './ensure-instance.ts';
import { createFirewallEnsurer, proxyNetworkTag, type FirewallEnsurer } from './firewall.ts';
import { instanceCalls } from './instance-calls.ts';
import { isManaged, toInstance, type InstanceSettings } from './lifecycle-instance.ts';

export { GcpAccessError, GcpRequestError } from './lifecycle-errors.ts';
export {
  FLEET_LABEL,
  PROXY_LABEL,
  METADATA_USER,
  METADATA_PASSWORD,
  METADATA_PORT,
  METADATA_POLICY,
  METADATA_USER_DATA,
  METADATA_STARTUP_SCRIPT,
  fleetFilter,
} from './lifecycle-instance.ts';
export { firewallRuleName, proxyNetworkTag } from './firewall.ts';

export const DEFAULT_MACHINE_TYPE = 'e2-micro';
export const DEFAULT_PROXY_PORT = 3128;
export const DEFAULT_PAGE_SIZE = 500;

export interface GcpLifecycleOptions {
  /** The provider's clients (`createComputeClients`); not closed by the lifecycle. */
  clients: ComputeClients;
  project: string;
  /** Zone for proxies whose spec has no placement. */
  zone: string;
  /** Machine type name (default e2-micro); with a template, leave it unset to use the template's. */
  machineType?: string;
  /** Boot disk image holding the forward proxy (`projects/p/global/images/family/f`). This or `instanceTemplate`. */
  image?: string;
  /** An instance template (`global/instanceTemplates/t` or a full URL). This or `image`. */
  instanceTemplate?: string;
  /** Port the forward proxy listens on (default 3128); passed to the image as metadata. */
  port?: number;
  /** Network of the NIC (default `global/networks/default`); ignored with a template. */
  network?: string;
  /** Network tags (for the firewall rule that opens the port); ignored with a template. */
  networkTags?: string[];
  /** The provider's name: names the managed firewall rule and the proxies' network tag. */
  provider?: string;
  /**
   * A managed firewall rule (needs `provider`): TCP on `port` from `sourceRanges` to the proxies' network
   * tag, on `network` (default: the instances' network). Ensured once before the first insert.
   */
  firewall?: { sourceRanges: string[]; network?: string };
  logger: Logger;
  /** `maxResults` of each aggregated-list page (≤ 500, default 500). */
  pageSize?: number;
  /** Pages one listing may take before it fails (default DEFAULT_MAX_PAGES); a repeated `nextPageToken` fails at once. */
  maxPages?: number;
  /** Least time between two operation polls when `wait` answers before the operation is done (default 1000 ms). */
  operationPollMs?: number;
  /** The document every proxy receives (`proxyEgressPolicy` of the provider's config); default: the default deny alone. */
  egressPolicy?: ProxyEgressPolicy;
  /**
   * Whether an insert carries the cloud-init `user-data` (and `startup-script`) that installs and starts the
   * proxy on a stock Debian 12 image (docs/gcp-provider.md). Default false here; the provider's configuration
   * (`proxies.bootUserData`) defaults it to true.
   */
  bootUserData?: boolean;
}

export function createGcpLifecycle(options: GcpLifecycleOptions): ProxyLifecycle {
  const { clients, project } = options;
  if (Boolean(options.image) === Boolean(options.instanceTemplate)) {
    throw new TypeError('createGcpLifecycle: give exactly one of image and instanceTemplate');
  }
  const port = options.port ?? DEFAULT_PROXY_PORT;
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const maxPages = options.maxPages ?? DEFAULT_MAX_PAGES;
  const pollMs = options.operationPollMs ?? 1000;
  const log = options.logger.child({ component: 'gcp-lifecycle', project });
  if (options.firewall && !options.provider) throw new TypeError('createGcpLifecycle: a firewall needs the provider name');
  const firewallTag = options.firewall && options.provider ? proxyNetworkTag(options.provider) : undefined;
  const network = options.network ?? 'global/networks/default';
  const firewall: FirewallEnsurer | undefined =
    options.firewall && options.provider
      ? createFirewallEnsurer({
          clients,
          project,
          settings: { provider: options.provider, sourceRanges: options.firewall.sourceRanges, network: options.firewall.network ?? network, port },
          logger: log,
          operationPollMs: pollMs,
        })
      : undefined;
  const calls = instanceCalls({ clients, project, pollMs, pageSize, maxPages, logger: log });
  const zoneOf = (placement: string | undefined): string => placement ?? options.zone;
  const policy = policyDocument(options.egressPolicy);
  const settings = (zone: string): InstanceSettings => ({
    zone,
    machineType: options.machineType ?? (options.instanceTemplate ? undefined : DEFAULT_MACHINE_TYPE),
    image: options.image,
    instanceTemplate: options.instanceTemplate,
    port,
    network,
    networkTags: options.networkTags ?? [],
    firewallTag,
    policy,
  });
  const ensure = instanceEnsurer({
    clients,
    project,
    calls,
    log,
    port,
    policy,
    settings,
    instanceTemplate: options.instanceTemplate,
    bootUserData: options.bootUserData ?? false,
    firewall,
  });

  return {
    ensureInstance: (spec, signal) => ensure(spec, zoneOf(spec.placement), signal),

    async getInstance(name, placement, signal) {
      const inst = await calls.read(name, zoneOf(placement), signal);
      return inst && isManaged(inst) ? toInstance(inst, port) : undefined;
    },

    deleteInstance: (name, placement, { owner }, signal) => deleteOwnInstance(calls, log, name, zoneOf(placement), owner, signal),

    async *listInstances(fleet, signal) {
      for await (const inst of calls.listFleet(fleet, signal)) yield toInstance(inst, port);
    },
  };
}
