/** The Pod a kubernetes proxy instance is, and how a Pod reads back as an `Instance`. */
import type { V1Pod } from '@kubernetes/client-node';
import type { Instance, InstanceSpec, InstanceState } from '../lifecycle.ts';
import { FLEET_LABEL, PROXY_LABEL, isManagedObject, ownerLabels } from './lifecycle-owner.ts';
import { POLICY_KEY, secretEnv } from './lifecycle-secret.ts';

export { FLEET_LABEL, PROXY_LABEL };
/**
 * The Pod annotation naming the resourceVersion of the Secret (credentials and egress policy) the Pod was
 * made for. A container does not re-read env from a changed Secret, so a Pod whose annotation differs from
 * the Secret's current version runs with old credentials or an old policy and is replaced.
 */
export const SECRET_VERSION_ANNOTATION = 'egress-proxies/secret-version';
/** The forward-proxy container's name. */
export const PROXY_CONTAINER = 'proxy';

export interface PodSettings {
  namespace: string;
  image: string;
  port: number;
}

/** The managed selector narrowed to one fleet: what `listInstances` asks the server for. */
export function fleetSelector(managedSelector: string, fleet: string): string {
  return `${managedSelector},${FLEET_LABEL}=${fleet}`;
}

/** True when the Pod carries every managed label (and so may be read, listed and deleted by us). */
export function isManaged(pod: V1Pod): boolean {
  return isManagedObject(pod);
}

/**
 * True when the Pod was made for this version of its Secret and its proxy container reads the policy from
 * it. The second test catches a Pod that an earlier release made (no policy env var) for a Secret this
 * release has already updated, e.g. during a rolling upgrade of the workers.
 */
export function madeForSecret(pod: V1Pod, secretVersion: string): boolean {
  if (pod.metadata?.annotations?.[SECRET_VERSION_ANNOTATION] !== secretVersion) return false;
  const container = pod.spec?.containers.find((c) => c.name === PROXY_CONTAINER);
  return container?.env?.some((e) => e.name === POLICY_KEY && e.valueFrom?.secretKeyRef?.key === POLICY_KEY) ?? false;
}

/**
 * The Pod for a spec: owner labels, one container with the configured image and port, PROXY_PORT, the env
 * vars PROXY_USER / PROXY_PASSWORD / EGRESS_PROXY_POLICY from the instance's Secret (`secretKeyRef`: the
 * values are not in the Pod spec), and a TCP readiness probe on the port so that Ready means "accepting connections". The
 * annotation records the Secret's resourceVersion (see SECRET_VERSION_ANNOTATION).
 */
export function podManifest(spec: InstanceSpec, s: PodSettings, secretVersion: string): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: spec.name,
      namespace: s.namespace,
      labels: ownerLabels(spec.owner),
      annotations: { [SECRET_VERSION_ANNOTATION]: secretVersion },
    },
    spec: {
      restartPolicy: 'Always',
      automountServiceAccountToken: false,
      containers: [
        {
          name: PROXY_CONTAINER,
          image: s.image,
          ports: [{ name: 'proxy', containerPort: s.port, protocol: 'TCP' }],
          env: [{ name: 'PROXY_PORT', value: String(s.port) }, ...secretEnv(spec.name)],
          readinessProbe: { tcpSocket: { port: s.port }, periodSeconds: 5 },
        },
      ],
    },
  };
}

/** Container waiting reasons that mean the image can never be run as configured. */
const FATAL_WAITING = new Set(['InvalidImageName', 'ErrImageNeverPull']);

function containerMessage(pod: V1Pod): { fatal: boolean; message: string | undefined } {
  const statuses = pod.status?.containerStatuses ?? [];
  const mine = statuses.find((c) => c.name === PROXY_CONTAINER) ?? statuses[0];
  const terminated = mine?.state?.terminated ?? mine?.lastState?.terminated;
  const waiting = mine?.state?.waiting;
  const fatal = waiting?.reason !== undefined && FATAL_WAITING.has(waiting.reason);
  const words = (reason?: string, message?: string): string | undefined => (reason && message ? `${reason}: ${message}` : (message ?? reason));
  const message = words(terminated?.reason, terminated?.message) ?? words(waiting?.reason, waiting?.message);
  return { fatal, message };
}

function stateOf(pod: V1Pod): { state: InstanceState; message: string | undefined } {
  const container = containerMessage(pod);
  const podWords = pod.status?.message ?? pod.status?.reason;
  if (pod.metadata?.deletionTimestamp) return { state: 'stopping', message: undefined };
  switch (pod.status?.phase) {
    case 'Running': {
      const ready = pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
      return { state: ready ? 'running' : 'provisioning', message: ready ? undefined : container.message };
    }
    case 'Failed':
      return { state: 'failed', message: container.message ?? podWords ?? 'the Pod failed' };
    case 'Succeeded':
      return { state: 'stopped', message: container.message ?? podWords };
    default:
      // Pending (or Unknown: the node is out of touch).
      if (container.fatal) return { state: 'failed', message: container.message };
      return { state: 'provisioning', message: container.message ?? podWords };
  }
}

export function iso(t: Date | string | undefined): string {
  if (t instanceof Date) return t.toISOString();
  return t ? new Date(t).toISOString() : new Date(0).toISOString();
}

/**
 * A managed Pod as an Instance. The endpoint is the Pod IP, once it has one, and the proxy container's
 * port as the Pod declares it (`defaultPort` when it declares none).
 */
export function podToInstance(pod: V1Pod, defaultPort: number): Instance {
  const labels = pod.metadata?.labels ?? {};
  const container = pod.spec?.containers.find((c) => c.name === PROXY_CONTAINER);
  const port = container?.ports?.[0]?.containerPort ?? defaultPort;
  const { state, message } = stateOf(pod);
  const podIP = pod.status?.podIP;
  return {
    name: pod.metadata?.name ?? '',
    id: pod.metadata?.uid ?? '',
    state,
    owner: { fleet: labels[FLEET_LABEL] ?? '', proxy: labels[PROXY_LABEL] ?? '' },
    ...(pod.metadata?.namespace ? { placement: pod.metadata.namespace } : {}),
    ...(podIP ? { endpoint: { host: podIP, port } } : {}),
    createdAt: iso(pod.metadata?.creationTimestamp),
    ...(message ? { message } : {}),
  };
}
