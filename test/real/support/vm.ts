/**
 * What the real VM suites share: the image from scripts/vm-image.sh, the direct kernel boot it
 * allows, loopback listeners, a request through a proxy, a logger whose text the test reads, and the
 * removal of the volumes a run uploaded to the test host's pool.
 */
import { execFile } from 'node:child_process';
import { request, type Server as HttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { LibvirtConnection } from '../../../src/kvm/libvirt/index.ts';
import { createLogger, type Logger } from '../../../src/logging.ts';
import type { KernelFiles } from '../../../src/providers/kvm/boot-files.ts';

export const run = promisify(execFile);
const VM_IMAGE = fileURLToPath(new URL('../../../scripts/vm-image.sh', import.meta.url));

/** Under TCG a boot takes 1.5 minutes on an idle 2-core machine; several under load. */
export const BOOT_DEADLINE_MS = 12 * 60_000;

/** A short id of this run, for names on the shared test host. */
export const RUN_ID = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;

export interface VmImage {
  baseFile: string;
  kernel: KernelFiles;
}

/** The Debian 12 image (built on the first call on a machine, cached after) and its direct kernel boot. */
export async function vmImage(): Promise<VmImage> {
  const dir = (await run('bash', [VM_IMAGE], { maxBuffer: 16 * 1024 * 1024 })).stdout.trim().split('\n').pop() ?? '';
  return {
    baseFile: join(dir, 'base.qcow2'),
    kernel: { kernelFile: join(dir, 'vmlinuz'), initrdFile: join(dir, 'initrd.img'), cmdline: 'root=/dev/vda rw console=ttyS0' },
  };
}

/** The kvm proxy settings every real VM here boots with: the image as the base, TCG, direct kernel boot, 1 GiB and two vCPUs. */
export function vmSettings(image: VmImage, baseImageVolume: string) {
  return { baseImageVolume, baseImageFile: image.baseFile, domainType: 'qemu', memoryMiB: 1024, vcpus: 2, kernel: image.kernel } as const;
}

export function listen(server: Server | HttpServer, port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
  });
}

/** `count` consecutive ports on 127.0.0.1 that are free now (a forward's range). */
export async function freePorts(count = 1): Promise<number> {
  const bindable = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
  for (let first = 20_000 + Math.floor(Math.random() * 9_000); ; first += count) {
    let all = true;
    for (let p = first; p < first + count && all; p++) all = await bindable(p);
    if (all) return first;
  }
}

/** A plain-HTTP request for `target` through the proxy at `endpoint`, with `user:password` as Basic Proxy-Authorization when given. */
export function viaProxy(
  endpoint: { host: string; port: number | string },
  target: string,
  auth: string | undefined,
  signal: AbortSignal,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: endpoint.host,
        port: endpoint.port,
        path: target,
        agent: false,
        signal,
        headers: { Host: new URL(target).host, ...(auth ? { 'Proxy-Authorization': `Basic ${Buffer.from(auth).toString('base64')}` } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * The first HTTP status the proxy at `endpoint` gives for `target` without credentials: slirp accepts
 * on the forwarded port at once and drops the connection while nothing listens in the guest, so the
 * first answer is the booted proxy's. One request at a time, each bounded; `deadline` bounds the boot.
 */
export async function firstAnswer(endpoint: { host: string; port: number }, target: string, deadline: AbortSignal): Promise<number> {
  for (;;) {
    deadline.throwIfAborted();
    const answer = await viaProxy(endpoint, target, undefined, AbortSignal.any([deadline, AbortSignal.timeout(10_000)])).catch(() => undefined);
    if (answer) return answer.status;
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/** A debug logger whose output the test reads (to check that no password reached it). */
export function capturedLogger(): { logger: Logger; text: () => string } {
  let text = '';
  const logger = createLogger({ level: 'debug', destination: new Writable({ write: (c: Buffer, _e, done) => ((text += c.toString()), done()) }) });
  return { logger, text: () => text };
}

/** Deletes the pool's volumes `doomed` names (a run's base image, its seeds) and the boot files' (`egress-boot-…`). */
export async function removeVolumes(c: LibvirtConnection, s: AbortSignal, pool: string, doomed: (name: string) => boolean): Promise<void> {
  const p = await c.storagePoolLookupByName(pool, s);
  for (const vol of await c.storagePoolListAllVolumes(p, s)) {
    if (doomed(vol.name) || vol.name.startsWith('egress-boot-')) await c.storageVolDelete(vol, 0, s);
  }
}
