/**
 * The Secret holding a kubernetes proxy's credentials: named after the instance, in the Pod's namespace,
 * with the Pod's labels, keys PROXY_USER and PROXY_PASSWORD. The Pod reads them with `secretKeyRef`, so the
 * credentials are not in the Pod spec. Nothing here logs or formats a value.
 */
import type { V1EnvVar, V1Secret } from '@kubernetes/client-node';
import type { InstanceSpec, ProxyCredentials } from '../lifecycle.ts';
import { ownerLabels } from './lifecycle-owner.ts';

export const USER_KEY = 'PROXY_USER';
export const PASSWORD_KEY = 'PROXY_PASSWORD';

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

export function secretManifest(spec: InstanceSpec, namespace: string): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: spec.name, namespace, labels: ownerLabels(spec.owner) },
    data: credentialData(spec.credentials),
  };
}

function credentialData(c: ProxyCredentials): Record<string, string> {
  return { [USER_KEY]: b64(c.username), [PASSWORD_KEY]: b64(c.password) };
}

/** True when the Secret holds exactly these credentials (compared decoded, so any valid encoding matches). */
export function holdsCredentials(secret: V1Secret, c: ProxyCredentials): boolean {
  const data = secret.data ?? {};
  const decoded = (k: string): string | undefined => (data[k] === undefined ? undefined : Buffer.from(data[k], 'base64').toString('utf8'));
  return decoded(USER_KEY) === c.username && decoded(PASSWORD_KEY) === c.password;
}

/** The Secret with the desired data and labels, keeping the server's metadata (its resourceVersion is the update's precondition). */
export function withCredentials(current: V1Secret, spec: InstanceSpec): V1Secret {
  return {
    ...current,
    type: current.type ?? 'Opaque',
    metadata: { ...current.metadata, labels: { ...current.metadata?.labels, ...ownerLabels(spec.owner) } },
    data: credentialData(spec.credentials),
  };
}

/** The container env that reads the credentials from the Secret. */
export function credentialEnv(secretName: string): V1EnvVar[] {
  return [USER_KEY, PASSWORD_KEY].map((key) => ({ name: key, valueFrom: { secretKeyRef: { name: secretName, key } } }));
}
