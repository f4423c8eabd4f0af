/** How the objects of a kubernetes proxy instance read back as an Instance: its Pod (behind its Service, when configured), or what is left of it. */
import type { V1Pod, V1Secret, V1Service } from '@kubernetes/client-node';
import type { Instance } from '../lifecycle.ts';
import type { KubernetesServiceConfig } from './config.ts';
import { ownerOf } from './lifecycle-owner.ts';
import { iso, podToInstance } from './lifecycle-pod.ts';
import { serviceEndpoint } from './lifecycle-service.ts';

/** The Pod as an Instance; with a Service configured, the endpoint is the Service's (or none yet). */
export function servedInstance(pod: V1Pod, service: V1Service | undefined, port: number, serviceConfig: KubernetesServiceConfig | undefined): Instance {
  const instance = podToInstance(pod, port);
  if (!serviceConfig) return instance;
  const { endpoint: _podEndpoint, ...rest } = instance;
  const found = service ? serviceEndpoint(service, serviceConfig) : { waiting: `Service "${instance.name}" is missing` };
  if ('endpoint' in found) return { ...rest, endpoint: found.endpoint };
  return rest.state === 'running' ? { ...rest, state: 'provisioning', message: found.waiting } : rest;
}

/** What is left of an instance whose Pod is gone: its Service or Secret (deleted next, or swept by GC). */
export function leftoverInstance(kind: 'Secret' | 'Service', obj: V1Secret | V1Service): Instance {
  return {
    name: obj.metadata?.name ?? '',
    id: obj.metadata?.uid ?? '',
    state: 'stopped',
    owner: ownerOf(obj),
    ...(obj.metadata?.namespace ? { placement: obj.metadata.namespace } : {}),
    createdAt: iso(obj.metadata?.creationTimestamp),
    message: `the Pod is gone; its ${kind} is left`,
  };
}
