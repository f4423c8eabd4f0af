/**
 * The Secret holding a kubernetes proxy's settings: named after the instance, in the Pod's namespace,
 * with the Pod's labels, keys PROXY_USER and PROXY_PASSWORD (the credentials) and EGRESS_PROXY_POLICY
 * (the provider's egress policy document, JSON, docs/proxies.md#egress-policy). The Pod reads all three
 * with `secretKeyRef`, so none is in the Pod spec. Nothing here logs or formats a value.
 */
import type { V1EnvVar, V1Secret } from '@kubernetes/client-node';
import type { InstanceSpec } from '../lifecycle.ts';
import { ownerLabels } from './lifecycle-owner.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

export const USER_KEY = 'PROXY_USER';
export const PASSWORD_KEY = 'PROXY_PASSWORD';
/** The Secret key, and the container's env var, holding the egress policy document. */
export const POLICY_KEY = 'EGRESS_PROXY_POLICY';

/** What the Secret of an instance holds: its credentials and the policy document as serialised. */
export interface SecretContents {
  credentials: ProxyCredentials;
  /** `JSON.stringify` of the provider's ProxyEgressPolicy. */
  policy: string;
}

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

export function secretManifest(spec: InstanceSpec, namespace: string, policy: string): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: spec.name, namespace, labels: ownerLabels(spec.owner) },
    data: secretData({ credentials: spec.credentials, policy }),
  };
}

function secretData(c: SecretContents): Record<string, string> {
  return { [USER_KEY]: b64(c.credentials.username), [PASSWORD_KEY]: b64(c.credentials.password), [POLICY_KEY]: b64(c.policy) };
}

/**
 * True when the Secret holds exactly these credentials and this policy document (compared decoded, so any
 * valid encoding matches). A Secret from before the policy key is not current: updating it gives it a new
 * resourceVersion, and the Pod made for the old one is replaced.
 */
export function holdsContents(secret: V1Secret, c: SecretContents): boolean {
  const data = secret.data ?? {};
  const decoded = (k: string): string | undefined => (data[k] === undefined ? undefined : Buffer.from(data[k], 'base64').toString('utf8'));
  return decoded(USER_KEY) === c.credentials.username && decoded(PASSWORD_KEY) === c.credentials.password && decoded(POLICY_KEY) === c.policy;
}

/** The Secret with the desired data and labels, keeping the server's metadata (its resourceVersion is the update's precondition). */
export function withContents(current: V1Secret, spec: InstanceSpec, policy: string): V1Secret {
  return {
    ...current,
    type: current.type ?? 'Opaque',
    metadata: { ...current.metadata, labels: { ...current.metadata?.labels, ...ownerLabels(spec.owner) } },
    data: secretData({ credentials: spec.credentials, policy }),
  };
}

/** The container env that reads the credentials and the policy document from the Secret. */
export function secretEnv(secretName: string): V1EnvVar[] {
  return [USER_KEY, PASSWORD_KEY, POLICY_KEY].map((key) => ({ name: key, valueFrom: { secretKeyRef: { name: secretName, key } } }));
}
