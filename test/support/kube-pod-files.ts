/**
 * Plays the kubelet's part of a rendered Pod without a cluster: the container's ConfigMap, Secret
 * and emptyDir volumes are written under a root directory, and its args and env are rewritten to
 * point there. Then the real `egress` command line of a Deployment can be run as the container
 * would run it (with `--check-config`), so the install cannot drift from the CLI's flags.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { at, find, type KubeObject } from './kube-install.ts';

interface Volume {
  name: string;
  configMap?: { name: string; items?: { key: string; path: string }[] };
  secret?: { secretName: string; optional?: boolean; items?: { key: string; path: string }[] };
  emptyDir?: object;
}
interface Container {
  name: string;
  args?: string[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  env?: { name: string; value?: string }[];
  volumeMounts?: { name: string; mountPath: string }[];
}

/** The files of a ConfigMap's or Secret's volume: each key (or the listed items) with its decoded content. */
function volumeFiles(objects: readonly KubeObject[], volume: Volume): Map<string, string> | undefined {
  const files = new Map<string, string>();
  if (volume.configMap) {
    const data = at<Record<string, string>>(find(objects, 'ConfigMap', volume.configMap.name), 'data') ?? {};
    const items = volume.configMap.items ?? Object.keys(data).map((key) => ({ key, path: key }));
    for (const item of items) files.set(item.path, data[item.key] ?? '');
    return files;
  }
  if (volume.secret) {
    const secret = objects.find((o) => o.kind === 'Secret' && o.metadata.name === volume.secret?.secretName);
    if (!secret) {
      if (volume.secret.optional) return undefined;
      throw new Error(`volume ${volume.name}: no Secret ${volume.secret.secretName}`);
    }
    const data = at<Record<string, string>>(secret, 'data') ?? {};
    const items = volume.secret.items ?? Object.keys(data).map((key) => ({ key, path: key }));
    for (const item of items) files.set(item.path, Buffer.from(data[item.key] ?? '', 'base64').toString('utf8'));
    return files;
  }
  return undefined;
}

/** Writes the container's volumes under `root` and returns its args and env with absolute paths moved under `root`. */
export async function materializeContainer(
  objects: readonly KubeObject[],
  workload: KubeObject,
  root: string,
): Promise<{ args: string[]; env: Record<string, string> }> {
  const pod = at<{ containers: Container[]; volumes?: Volume[] }>(workload, 'spec.template.spec');
  const container = pod?.containers[0];
  if (!pod || !container) throw new Error(`${workload.kind}/${workload.metadata.name} has no container`);
  for (const mount of container.volumeMounts ?? []) {
    const volume = (pod.volumes ?? []).find((v) => v.name === mount.name);
    if (!volume) throw new Error(`${workload.metadata.name}: volumeMount ${mount.name} has no volume`);
    await mkdir(join(root, mount.mountPath), { recursive: true });
    for (const [path, content] of volumeFiles(objects, volume) ?? []) {
      await mkdir(dirname(join(root, mount.mountPath, path)), { recursive: true });
      await writeFile(join(root, mount.mountPath, path), content, { mode: 0o600 });
    }
  }
  const moved = (value: string): string => (value.startsWith('/') ? join(root, value) : value);
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (!from.configMapRef) throw new Error(`${workload.metadata.name}: only envFrom configMapRef is played here`);
    const data = at<Record<string, string>>(find(objects, 'ConfigMap', from.configMapRef.name), 'data') ?? {};
    for (const [key, value] of Object.entries(data)) env[key] = moved(value);
  }
  for (const e of container.env ?? []) if (e.value !== undefined) env[e.name] = moved(e.value);
  return { args: (container.args ?? []).map(moved), env };
}
