import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';

/** Coordinates of the real KVM test host made by scripts/kvm-test-host.sh. */
export interface KvmTestHost {
  /** libvirt's rw socket on the host (the streamlocal target). */
  socket: string;
  /** qemu:///system */
  uri: string;
  /** The running dir pool (`default`) and its target directory. */
  pool: string;
  poolDir: string;
  /** A defined but inactive pool, for negative tests. */
  inactivePool: string;
  ssh: {
    host: string;
    port: number;
    user: string;
    /** Client private key file (ed25519). */
    keyFile: string;
    /** OpenSSH known_hosts file holding `[127.0.0.1]:2222 ssh-ed25519 …`. */
    knownHostsFile: string;
  };
  libvirtdPidFile: string;
  sshdPidFile: string;
}

const SCRIPT = fileURLToPath(new URL('../../scripts/kvm-test-host.sh', import.meta.url));
const ENV_FILE = '/var/lib/egress-kvm-test-host/env';

let memo: Promise<KvmTestHost> | undefined;

/**
 * Makes this machine a KVM test host (once per process) and returns its coordinates.
 * Throws when the host cannot be made: tests that need it must fail, not skip.
 */
export function kvmTestHost(): Promise<KvmTestHost> {
  memo ??= makeHost();
  return memo;
}

async function makeHost(): Promise<KvmTestHost> {
  await new Promise<void>((resolve, reject) => {
    execFile('bash', [SCRIPT, 'up'], { timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }, (err, _stdout, stderr) => {
      if (err) {
        reject(new Error(`kvm test host: "bash ${SCRIPT} up" failed (${err.message.split('\n')[0]}):\n${stderr}`, { cause: err }));
      } else {
        resolve();
      }
    });
  });
  const env = parseEnvFile(await readFile(ENV_FILE, 'utf8'));
  const get = (key: string): string => {
    const value = env.get(key);
    if (!value) throw new Error(`kvm test host: ${ENV_FILE} has no ${key}`);
    return value;
  };
  const port = Number(get('KVM_TEST_SSH_PORT'));
  if (!Number.isInteger(port) || port <= 0) throw new Error(`kvm test host: bad KVM_TEST_SSH_PORT in ${ENV_FILE}`);
  return {
    socket: get('KVM_TEST_SOCKET'),
    uri: get('KVM_TEST_URI'),
    pool: get('KVM_TEST_POOL'),
    poolDir: get('KVM_TEST_POOL_DIR'),
    inactivePool: get('KVM_TEST_INACTIVE_POOL'),
    ssh: {
      host: get('KVM_TEST_SSH_HOST'),
      port,
      user: get('KVM_TEST_SSH_USER'),
      keyFile: get('KVM_TEST_SSH_KEY'),
      knownHostsFile: get('KVM_TEST_KNOWN_HOSTS'),
    },
    libvirtdPidFile: get('KVM_TEST_LIBVIRTD_PIDFILE'),
    sshdPidFile: get('KVM_TEST_SSHD_PIDFILE'),
  };
}

/** Parses shell `KEY=value` lines (values optionally single- or double-quoted). */
export function parseEnvFile(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    let value = line.slice(eq + 1);
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.endsWith(value[0])) value = value.slice(1, -1);
    out.set(line.slice(0, eq), value);
  }
  return out;
}

/** The libvirtd pid from its pidfile (for SIGSTOP/SIGCONT in tests). */
export async function libvirtdPid(host: KvmTestHost): Promise<number> {
  const pid = Number((await readFile(host.libvirtdPidFile, 'utf8')).trim());
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`kvm test host: no pid in ${host.libvirtdPidFile}`);
  return pid;
}

/** The configuration of a KVM host entry that reaches the test host (real sshd, real libvirtd). */
export function kvmHostConfigOf(host: KvmTestHost, name: string, overrides: Partial<KvmHostConfig> = {}): KvmHostConfig {
  return {
    name,
    address: host.ssh.host,
    port: host.ssh.port,
    user: host.ssh.user,
    privateKeyFile: host.ssh.keyFile,
    knownHostsFile: host.ssh.knownHostsFile,
    insecureIgnoreHostKey: false,
    pool: host.pool,
    socketPath: host.socket,
    uri: host.uri,
    ...overrides,
  };
}

/** Destroys and undefines the domain `name` if it exists and deletes whichever of its volumes (`<name><suffix>`) exist. */
export async function removeDomainAndVolumes(
  c: LibvirtConnection,
  s: AbortSignal,
  poolName: string,
  name: string,
  volumeSuffixes: readonly string[] = ['.qcow2', '.seed.iso'],
): Promise<void> {
  const dom = await orUndefined(c.domainLookupByName(name, s));
  if (dom) {
    await c.domainDestroy(dom, 0, s).catch(() => undefined);
    await c.domainUndefine(dom, 4, s);
  }
  if (volumeSuffixes.length === 0) return;
  const pool = await c.storagePoolLookupByName(poolName, s);
  for (const suffix of volumeSuffixes) {
    const vol = await orUndefined(c.storageVolLookupByName(pool, `${name}${suffix}`, s));
    if (vol) await c.storageVolDelete(vol, 0, s);
  }
}
