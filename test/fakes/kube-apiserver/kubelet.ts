/**
 * What the kubelet does with a container's env, for tests that play it: plain values as given, and
 * `valueFrom.secretKeyRef` read from the Secret in the Pod's namespace (a missing Secret or key throws, as
 * the kubelet then refuses to start the container: CreateContainerConfigError).
 */
import type { FakePod } from './pod-store.ts';
import type { FakeKubeApiserver } from './server.ts';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
}

export function podEnv(kube: FakeKubeApiserver, pod: FakePod, container = 0): Record<string, string> {
  const env = (pod.spec.containers[container]?.env ?? []) as EnvVar[];
  const out: Record<string, string> = {};
  for (const e of env) {
    const ref = e.valueFrom?.secretKeyRef;
    if (!ref) {
      out[e.name] = e.value ?? '';
      continue;
    }
    const secret = kube.getSecret(pod.metadata.namespace, ref.name);
    const data = (secret?.data ?? {}) as Record<string, string>;
    const value = data[ref.key];
    if (value === undefined) {
      if (ref.optional) continue;
      throw new Error(secret ? `couldn't find key ${ref.key} in Secret ${pod.metadata.namespace}/${ref.name}` : `secret "${ref.name}" not found`);
    }
    out[e.name] = Buffer.from(value, 'base64').toString('utf8');
  }
  return out;
}
