import type { IncomingMessage } from 'node:http';
import { Server as ProxyServer } from 'proxy-chain';
import { METADATA_PASSWORD, METADATA_USER } from '../../src/providers/gcp/lifecycle.ts';
import type { FakeCompute, FakeInstance } from '../fakes/compute/index.ts';
import { podEnv, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';

/**
 * What the fakes lack and a proxy on kubernetes or gcp needs to turn Ready: a kubelet and VMs.
 * One real forward proxy (proxy-chain) listens on every address; each Pod gets a loopback address
 * of its own in 127.1.0.0/16 and each VM an external address in 127.2.0.0/16, and a request is
 * authenticated with the credentials of the Pod (its Secret, read as the kubelet does) or the VM
 * (its metadata) that owns the address it arrived on. The kubelet loop runs every Pending Pod and
 * finishes every graceful deletion.
 */
export interface CloudHosts {
  readonly port: number;
  /** The next VM address, for the Compute fake's `externalIps`. */
  nextVmAddress(): string;
  /** The Compute fake whose VMs this serves (set once it exists). */
  serveVms(compute: FakeCompute): void;
  close(): Promise<void>;
}

const metadataOf = (i: FakeInstance, key: string): string | undefined =>
  (i.metadata as { items?: { key: string; value: string }[] } | undefined)?.items?.find((m) => m.key === key)?.value;

function addressFrom(counter: number, second: number): string {
  return `127.${second}.${Math.floor(counter / 250) % 250}.${(counter % 250) + 1}`;
}

export async function startCloudHosts(kube: FakeKubeApiserver, namespace: string): Promise<CloudHosts> {
  let pods = 0;
  let vms = 0;
  let compute: FakeCompute | undefined;
  const credentialsAt = (address: string): { user: string; password: string } | undefined => {
    if (address.startsWith('127.1.')) {
      const pod = kube.listPods(namespace).find((p) => p.status.podIP === address && !p.metadata.deletionTimestamp);
      if (!pod) return undefined;
      try {
        const env = podEnv(kube, pod);
        return { user: env.PROXY_USER ?? '', password: env.PROXY_PASSWORD ?? '' };
      } catch {
        return undefined;
      }
    }
    const vm = compute?.listInstances().find((i) => i.status === 'RUNNING' && i.networkInterfaces[0]?.accessConfigs?.[0]?.natIP === address);
    return vm ? { user: metadataOf(vm, METADATA_USER) ?? '', password: metadataOf(vm, METADATA_PASSWORD) ?? '' } : undefined;
  };
  const server = new ProxyServer({
    port: 0,
    prepareRequestFunction: ({ username, password, request }: { username: string; password: string; request: IncomingMessage }) => {
      const local = (request.socket.localAddress ?? '').replace(/^::ffff:/, '');
      const creds = credentialsAt(local);
      return { requestAuthentication: !creds || !creds.user || creds.user !== username || creds.password !== password };
    },
  });
  await server.listen();
  const kubelet = setInterval(() => {
    for (const pod of kube.listPods(namespace)) {
      try {
        if (pod.metadata.deletionTimestamp) kube.finishPodDeletion(namespace, pod.metadata.name);
        else if (!pod.status.podIP) kube.setPodStatus(namespace, pod.metadata.name, { phase: 'Running', podIP: addressFrom(pods++, 1), ready: true });
      } catch {
        // deleted meanwhile
      }
    }
  }, 100);
  return {
    port: server.port,
    nextVmAddress: () => addressFrom(vms++, 2),
    serveVms(c) {
      compute = c;
    },
    async close() {
      clearInterval(kubelet);
      await server.close(true);
    },
  };
}
