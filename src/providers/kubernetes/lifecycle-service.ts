/**
 * The optional Service in front of a proxy Pod (`proxies.service`): named after the instance, with the
 * Pod's labels, selecting the Pod by its owner labels, one TCP port to the proxy port. The proxy's endpoint
 * is then the Service's: ClusterIP → cluster IP and port; NodePort → `nodeAddress` and the node port;
 * LoadBalancer → the first ingress IP (or hostname) and port, once the cloud has provisioned one.
 */
import type { V1Service } from '@kubernetes/client-node';
import type { InstanceSpec } from '../lifecycle.ts';
import type { KubernetesServiceConfig } from './config.ts';
import { ownerLabels } from './lifecycle-owner.ts';

export function serviceManifest(spec: InstanceSpec, namespace: string, port: number, config: KubernetesServiceConfig): V1Service {
  const labels = ownerLabels(spec.owner);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: spec.name, namespace, labels },
    spec: {
      type: config.type,
      selector: labels,
      ports: [{ name: 'proxy', protocol: 'TCP', port, targetPort: port }],
    },
  };
}

/** Where the Service is reached, or why not yet (a LoadBalancer without an ingress). */
export function serviceEndpoint(service: V1Service, config: KubernetesServiceConfig): { endpoint: { host: string; port: number } } | { waiting: string } {
  const name = service.metadata?.name ?? '';
  const port = service.spec?.ports?.[0];
  if (!port) return { waiting: `Service "${name}" has no port` };
  switch (config.type) {
    case 'ClusterIP': {
      const ip = service.spec?.clusterIP;
      return ip && ip !== 'None' ? { endpoint: { host: ip, port: port.port } } : { waiting: `Service "${name}" has no cluster IP yet` };
    }
    case 'NodePort':
      return port.nodePort ? { endpoint: { host: config.nodeAddress ?? '', port: port.nodePort } } : { waiting: `Service "${name}" has no node port yet` };
    case 'LoadBalancer': {
      const ingress = service.status?.loadBalancer?.ingress?.[0];
      const host = ingress?.ip ?? ingress?.hostname;
      return host ? { endpoint: { host, port: port.port } } : { waiting: `waiting for the load balancer of Service "${name}" to get an address` };
    }
  }
}
