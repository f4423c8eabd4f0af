/** The Compute instance a gcp proxy instance is, and how an instance reads back as an `Instance`. */
import type { protos } from '@google-cloud/compute';
import { otherProxyReason, ProvisioningError, type Instance, type InstanceSpec, type InstanceState } from '../lifecycle.ts';
import { MANAGED_FILTER, MANAGED_LABELS, MANAGED_LABEL_KEY, MANAGED_LABEL_VALUE } from './labels.ts';

export type ComputeInstance = protos.google.cloud.compute.v1.IInstance;

/** Owner labels stamped on every proxy instance next to MANAGED_LABELS. */
export const FLEET_LABEL = 'egress-fleet';
export const PROXY_LABEL = 'egress-proxy';
/** Instance metadata keys the proxy image reads its settings from. */
export const METADATA_USER = 'egress-proxy-user';
export const METADATA_PASSWORD = 'egress-proxy-password';
export const METADATA_PORT = 'egress-proxy-port';
/** The egress policy document (JSON, docs/proxies.md#egress-policy); kept current on existing instances. */
export const METADATA_POLICY = 'egress-proxy-policy';
/** The cloud-init user-data that installs and starts the proxy on a stock Debian 12 image (src/providers/boot/). */
export const METADATA_USER_DATA = 'user-data';
/** Runs the user-data through cloud-init on images without it (src/providers/boot/gce-startup-script.ts). */
export const METADATA_STARTUP_SCRIPT = 'startup-script';

export interface InstanceSettings {
  zone: string;
  /** Machine type name; with a template, only sent when configured (it then overrides the template's). */
  machineType: string | undefined;
  /** Boot disk source image (`projects/p/global/images/family/f`); unset when a template is used. */
  image: string | undefined;
  /** Instance template (`global/instanceTemplates/t`); the request then carries only what we stamp. */
  instanceTemplate: string | undefined;
  port: number;
  network: string;
  networkTags: string[];
  /** The managed firewall rule's target tag, when the provider has one: on every instance, template or not. */
  firewallTag: string | undefined;
  /** `JSON.stringify` of the provider's ProxyEgressPolicy. */
  policy: string;
}

/** `(labels.managed-by = "egress-proxies") (labels.egress-fleet = "<fleet>")`: both terms ANDed. */
export function fleetFilter(fleet: string): string {
  return `(${MANAGED_FILTER}) (labels.${FLEET_LABEL} = "${fleet}")`;
}

export function isManaged(inst: ComputeInstance): boolean {
  const labels = inst.labels ?? {};
  return labels[MANAGED_LABEL_KEY] === MANAGED_LABEL_VALUE && Boolean(labels[FLEET_LABEL]) && Boolean(labels[PROXY_LABEL]);
}

/** The boot items of an insert: the proxy's user-data (secret: it holds the password) and the startup script. */
export interface BootItems {
  userData: string;
  startupScript: string;
}

/**
 * The insert body: name, owner labels, credentials, port and egress policy as metadata items (with `boot`, also
 * `user-data` and `startup-script`), and (without a template) machine type, boot disk from the image and one NIC
 * with an external address (the proxy's endpoint).
 */
export function instanceResource(spec: InstanceSpec, s: InstanceSettings, boot?: BootItems): ComputeInstance {
  const stamped: ComputeInstance = {
    name: spec.name,
    labels: { ...MANAGED_LABELS, [FLEET_LABEL]: spec.owner.fleet, [PROXY_LABEL]: spec.owner.proxy },
    metadata: {
      items: [
        { key: METADATA_USER, value: spec.credentials.username },
        { key: METADATA_PASSWORD, value: spec.credentials.password },
        { key: METADATA_PORT, value: String(s.port) },
        { key: METADATA_POLICY, value: s.policy },
        ...(boot
          ? [
              { key: METADATA_USER_DATA, value: boot.userData },
              { key: METADATA_STARTUP_SCRIPT, value: boot.startupScript },
            ]
          : []),
      ],
    },
  };
  const machineType = s.machineType ? { machineType: `zones/${s.zone}/machineTypes/${s.machineType}` } : {};
  const tags = [...new Set([...s.networkTags, ...(s.firewallTag ? [s.firewallTag] : [])])];
  // With a template, tags in the body replace the template's: sent only for the firewall rule's tag.
  if (s.instanceTemplate) return { ...stamped, ...machineType, ...(s.firewallTag ? { tags: { items: tags } } : {}) };
  return {
    ...stamped,
    ...machineType,
    disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: s.image ?? null } }],
    networkInterfaces: [{ network: s.network, accessConfigs: [{ name: 'External NAT', type: 'ONE_TO_ONE_NAT' }] }],
    ...(tags.length ? { tags: { items: tags } } : {}),
  };
}

/**
 * The setMetadata body that brings an instance's policy item to `policy` (every other item kept as it
 * is, under the fingerprint read with them), or undefined when it already holds exactly that text.
 */
export function policyUpdate(inst: ComputeInstance, policy: string): { fingerprint: string; items: { key: string; value: string }[] } | undefined {
  const items = (inst.metadata?.items ?? []).map((i) => ({ key: i.key ?? '', value: i.value ?? '' }));
  const at = items.findIndex((i) => i.key === METADATA_POLICY);
  if (at >= 0 && items[at]?.value === policy) return undefined;
  if (at >= 0) items[at] = { key: METADATA_POLICY, value: policy };
  else items.push({ key: METADATA_POLICY, value: policy });
  return { fingerprint: inst.metadata?.fingerprint ?? '', items };
}

const STATES: Record<string, InstanceState> = {
  PROVISIONING: 'provisioning',
  STAGING: 'provisioning',
  REPAIRING: 'provisioning',
  RUNNING: 'running',
  STOPPING: 'stopping',
  SUSPENDING: 'stopping',
  STOPPED: 'stopped',
  SUSPENDED: 'stopped',
  TERMINATED: 'stopped',
};

/** The last segment of a resource URL (`…/zones/us-central1-a` → `us-central1-a`). */
export function lastSegment(url: string | null | undefined): string | undefined {
  return url ? url.slice(url.lastIndexOf('/') + 1) : undefined;
}

/**
 * A managed instance as an Instance. The endpoint is the first NIC's external address and the port from
 * the instance's own metadata (`defaultPort` when absent).
 */
export function toInstance(inst: ComputeInstance, defaultPort: number): Instance {
  const labels = inst.labels ?? {};
  const natIP = inst.networkInterfaces?.[0]?.accessConfigs?.find((a) => a.natIP)?.natIP;
  const portItem = inst.metadata?.items?.find((i) => i.key === METADATA_PORT)?.value;
  const port = portItem && /^\d+$/.test(portItem) ? Number(portItem) : defaultPort;
  const zone = lastSegment(inst.zone);
  const created = inst.creationTimestamp ? new Date(inst.creationTimestamp) : new Date(0);
  return {
    name: inst.name ?? '',
    id: String(inst.id ?? ''),
    state: STATES[String(inst.status)] ?? 'provisioning',
    owner: { fleet: labels[FLEET_LABEL] ?? '', proxy: labels[PROXY_LABEL] ?? '' },
    ...(zone ? { placement: zone } : {}),
    ...(natIP ? { endpoint: { host: natIP, port } } : {}),
    createdAt: Number.isNaN(created.getTime()) ? new Date(0).toISOString() : created.toISOString(),
    ...(inst.statusMessage ? { message: inst.statusMessage } : {}),
  };
}

/** An existing instance of the spec's name as an Instance; ProvisioningError when it is not this proxy's (it is left alone). */
export function adoptInstance(inst: ComputeInstance, spec: InstanceSpec, zone: string, defaultPort: number): Instance {
  const labels = inst.labels ?? {};
  if (!isManaged(inst)) {
    throw new ProvisioningError(`an instance named "${spec.name}" exists in zone "${zone}" without our labels; it is left alone`);
  }
  const other = otherProxyReason({ fleet: labels[FLEET_LABEL] ?? '', proxy: labels[PROXY_LABEL] ?? '' }, spec.owner);
  if (other) throw new ProvisioningError(`instance "${spec.name}" in zone "${zone}" ${other}`);
  return toInstance(inst, defaultPort);
}

/** Why an instance is not running, for the logs: the API does not say whether a spot VM was preempted or stopped. */
export function stopReason(inst: ComputeInstance): string {
  const status = String(inst.status);
  if (status === 'SUSPENDED') return 'suspended';
  const spot = String(inst.scheduling?.provisioningModel) === 'SPOT' || inst.scheduling?.preemptible === true;
  return spot ? 'preempted or stopped (spot VM)' : 'stopped';
}
