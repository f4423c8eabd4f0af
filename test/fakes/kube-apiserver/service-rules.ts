/**
 * Service validation, defaulting and allocation as the real apiserver does it (a subset): names are DNS-1035
 * labels; `type` defaults to ClusterIP; a cluster IP is allocated from the fake service range
 * 10.96.0.0/12 (unless `None`: headless); NodePort and LoadBalancer Services get a unique `nodePort` per
 * port in 30000–32767 (a requested one must be free and in range); ports default to TCP with
 * `targetPort = port`; `status` is a subresource (`status.loadBalancer` starts empty, the cloud controller
 * — the test — fills it in). Deleting a Service releases its IP and ports.
 */
import type { FakeObject, IncomingObject, KindRules } from './object-store.ts';
import { invalid } from './status.ts';

const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const TYPES = ['ClusterIP', 'ExternalName', 'LoadBalancer', 'NodePort'];
export const NODE_PORT_MIN = 30000;
export const NODE_PORT_MAX = 32767;

interface ServicePort {
  name?: string;
  port?: unknown;
  protocol?: string;
  targetPort?: unknown;
  nodePort?: unknown;
  [k: string]: unknown;
}

interface ServiceSpec {
  type?: string;
  clusterIP?: string;
  clusterIPs?: string[];
  ports?: ServicePort[];
  selector?: Record<string, string>;
  [k: string]: unknown;
}

/** Service rules with their own allocators (one per fake apiserver). */
export function serviceRules(): KindRules {
  const ips = new Set<string>();
  const nodePorts = new Set<number>();
  let nextIp = 10;
  let nextPort = NODE_PORT_MIN;

  function allocateIp(): string {
    // 10.96.0.0/12: 10.96.0.10 upwards, skipping IPs in use.
    for (;;) {
      const n = nextIp++;
      const ip = `10.${96 + ((n >> 16) & 0x0f)}.${(n >> 8) & 0xff}.${n & 0xff}`;
      if (!ips.has(ip) && (n & 0xff) !== 0 && (n & 0xff) !== 255) return ip;
    }
  }

  function allocatePort(): number {
    for (let i = 0; i <= NODE_PORT_MAX - NODE_PORT_MIN; i++) {
      const p = nextPort;
      nextPort = nextPort >= NODE_PORT_MAX ? NODE_PORT_MIN : nextPort + 1;
      if (!nodePorts.has(p)) return p;
    }
    throw invalid('Service', '', [{ field: 'spec.ports[0].nodePort', message: 'Internal error: range is full' }]);
  }

  function release(o: FakeObject): void {
    const spec = (o.spec ?? {}) as ServiceSpec;
    for (const ip of spec.clusterIPs ?? (spec.clusterIP ? [spec.clusterIP] : [])) ips.delete(ip);
    for (const p of spec.ports ?? []) if (typeof p.nodePort === 'number') nodePorts.delete(p.nodePort);
  }

  /** Validates and defaults a spec; `old` is the current spec on an update (its IP and ports carry over). */
  function prepare(name: string, obj: IncomingObject, old?: ServiceSpec): IncomingObject {
    const spec = structuredClone((obj.spec ?? {}) as ServiceSpec);
    const causes: { field: string; message: string; reason?: string }[] = [];
    spec.type ??= 'ClusterIP';
    if (!TYPES.includes(spec.type)) {
      causes.push({
        field: 'spec.type',
        message: `Unsupported value: "${spec.type}": supported values: ${TYPES.map((t) => `"${t}"`).join(', ')}`,
        reason: 'FieldValueNotSupported',
      });
    }
    const usesNodePorts = spec.type === 'NodePort' || spec.type === 'LoadBalancer';
    const headless = spec.clusterIP === 'None';
    const ports = spec.ports ?? [];
    if (spec.type !== 'ExternalName' && !headless && ports.length === 0)
      causes.push({ field: 'spec.ports', message: 'Required value', reason: 'FieldValueRequired' });
    ports.forEach((p, i) => {
      if (typeof p.port !== 'number' || !Number.isInteger(p.port) || p.port < 1 || p.port > 65535) {
        causes.push({ field: `spec.ports[${i}].port`, message: `Invalid value: ${JSON.stringify(p.port ?? 0)}: must be between 1 and 65535, inclusive` });
      }
      if (ports.length > 1 && !p.name) causes.push({ field: `spec.ports[${i}].name`, message: 'Required value', reason: 'FieldValueRequired' });
      p.protocol ??= 'TCP';
      if (!['TCP', 'UDP', 'SCTP'].includes(p.protocol))
        causes.push({
          field: `spec.ports[${i}].protocol`,
          message: `Unsupported value: "${p.protocol}": supported values: "SCTP", "TCP", "UDP"`,
          reason: 'FieldValueNotSupported',
        });
      p.targetPort ??= p.port;
      if (p.nodePort !== undefined && !usesNodePorts) {
        causes.push({
          field: `spec.ports[${i}].nodePort`,
          message: `Forbidden: may not be used when \`type\` is '${spec.type}'`,
          reason: 'FieldValueForbidden',
        });
      }
    });
    if (old && old.clusterIP && spec.clusterIP && spec.clusterIP !== old.clusterIP) {
      causes.push({ field: 'spec.clusterIPs[0]', message: `Invalid value: "${spec.clusterIP}": may not change once set` });
    }
    if (causes.length) throw invalid('Service', name, causes);

    // Allocation (after validation, so a refused Service holds nothing).
    const taken: number[] = [];
    const fail = (field: string, message: string): never => {
      for (const p of taken) nodePorts.delete(p);
      throw invalid('Service', name, [{ field, message }]);
    };
    if (usesNodePorts) {
      ports.forEach((p, i) => {
        const kept = old?.ports?.find((o) => o.port === p.port && (o.protocol ?? 'TCP') === p.protocol)?.nodePort;
        if (p.nodePort === undefined && typeof kept === 'number') p.nodePort = kept;
        if (p.nodePort === undefined) {
          p.nodePort = allocatePort();
          nodePorts.add(p.nodePort as number);
          taken.push(p.nodePort as number);
          return;
        }
        const n = p.nodePort;
        if (typeof n !== 'number' || n < NODE_PORT_MIN || n > NODE_PORT_MAX) {
          fail(
            `spec.ports[${i}].nodePort`,
            `Invalid value: ${JSON.stringify(n)}: provided port is not in the valid range. The range of valid ports is ${NODE_PORT_MIN}-${NODE_PORT_MAX}`,
          );
        }
        const ownedBefore = old?.ports?.some((o) => o.nodePort === n) ?? false;
        if (nodePorts.has(n as number) && !ownedBefore)
          fail(`spec.ports[${i}].nodePort`, `Invalid value: ${JSON.stringify(n)}: provided port is already allocated`);
        nodePorts.add(n as number);
        taken.push(n as number);
      });
    }
    if (old) {
      // Ports the old spec held and the new one does not are released.
      for (const o of old.ports ?? []) if (typeof o.nodePort === 'number' && !ports.some((p) => p.nodePort === o.nodePort)) nodePorts.delete(o.nodePort);
    }
    if (spec.type !== 'ExternalName') {
      if (old?.clusterIP) spec.clusterIP = old.clusterIP;
      else if (!headless) {
        if (spec.clusterIP) {
          if (ips.has(spec.clusterIP)) fail('spec.clusterIPs[0]', `Invalid value: "${spec.clusterIP}": provided IP is already allocated`);
        } else spec.clusterIP = allocateIp();
        ips.add(spec.clusterIP);
      }
      spec.clusterIPs = [spec.clusterIP ?? 'None'];
      spec.ipFamilies ??= ['IPv4'];
      spec.ipFamilyPolicy ??= 'SingleStack';
      spec.internalTrafficPolicy ??= 'Cluster';
    }
    spec.sessionAffinity ??= 'None';
    if (usesNodePorts) spec.externalTrafficPolicy ??= 'Cluster';
    if (spec.type === 'LoadBalancer') spec.allocateLoadBalancerNodePorts ??= true;
    return { ...obj, spec, status: { loadBalancer: {} } };
  }

  return {
    kind: 'Service',
    plural: 'services',
    keepOnUpdate: ['status'],
    onCreate(name, obj) {
      if (name.length > 63 || !DNS_1035.test(name)) {
        throw invalid('Service', name, [
          {
            field: 'metadata.name',
            message: `Invalid value: "${name}": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
          },
        ]);
      }
      return prepare(name, obj);
    },
    onUpdate(name, cur: FakeObject, obj) {
      return prepare(name, obj, cur.spec as ServiceSpec);
    },
    onDelete: release,
  };
}
