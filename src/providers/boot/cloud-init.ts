/**
 * The cloud-init user-data that turns a stock Debian 12 cloud image into one proxy instance:
 * Debian's `nodejs` (Node 18) from apt, the bundled forward-proxy program, an 0600 EnvironmentFile
 * with the port and the credentials, and a systemd unit that runs the program as a dynamic
 * (non-root) user and restarts it. Rendered per proxy by the gcp and kvm lifecycles.
 *
 * The egress policy's source depends on where it can change:
 * - `file` (kvm): the document is part of the user-data (a domain's policy is fixed at define time);
 * - `gce-metadata` (gcp): the metadata item `egress-proxy-policy` stays the one source; a second unit
 *   copies it into the policy file and follows setMetadata changes (gce-policy-sync.ts).
 *
 * The result holds the proxy's password: it is a secret and never logged.
 */
import { gzipSync } from 'node:zlib';
import { stringify } from 'yaml';
import { ProvisioningError } from '../lifecycle.ts';
import type { BootPrograms } from './programs.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

/** Where everything lives on the VM (one directory: easy to inspect, one path for ReadWritePaths). */
export const BOOT_DIR = '/opt/egress-proxy';
export const PROXY_PROGRAM_PATH = `${BOOT_DIR}/proxy-process.cjs`;
export const POLICY_SYNC_PATH = `${BOOT_DIR}/policy-sync.cjs`;
export const ENV_FILE_PATH = `${BOOT_DIR}/proxy.env`;
export const POLICY_FILE_PATH = `${BOOT_DIR}/policy.json`;
export const PROXY_UNIT = 'egress-proxy.service';
export const POLICY_UNIT = 'egress-proxy-policy.service';
/** Debian 12's Node: the package's binary. */
const NODE = '/usr/bin/node';

export type PolicySource = { kind: 'file'; document: string } | { kind: 'gce-metadata' };

export interface UserDataParams {
  credentials: ProxyCredentials;
  port: number;
  policy: PolicySource;
  programs: BootPrograms;
}

/**
 * A value in single quotes, as systemd's EnvironmentFile reads it: everything literal up to the
 * closing quote. A quote, a backslash or a line break cannot be written that way and is refused.
 */
function envValue(field: string, value: string): string {
  if (/['\\\r\n\0]/.test(value)) {
    throw new ProvisioningError(`${field}: contains a quote, a backslash or a line break, which the proxy VM's environment file cannot hold`);
  }
  return `'${value}'`;
}

function envFile(p: UserDataParams): string {
  return [
    `PROXY_HOST=${envValue('host', '0.0.0.0')}`,
    `PROXY_PORT=${envValue('port', String(p.port))}`,
    `PROXY_USER=${envValue('credentials.username', p.credentials.username)}`,
    `PROXY_PASSWORD=${envValue('credentials.password', p.credentials.password)}`,
    '',
  ].join('\n');
}

/** A simple systemd service started at boot after the network, restarted whenever it exits. */
function serviceUnit(description: string, after: string[], service: string[]): string {
  return [
    '[Unit]',
    `Description=${description}`,
    'Wants=network-online.target',
    `After=${['network-online.target', ...after].join(' ')}`,
    '',
    '[Service]',
    'Type=simple',
    ...service,
    'ProtectSystem=strict',
    'ProtectHome=yes',
    'PrivateTmp=yes',
    'Restart=always',
    'RestartSec=2',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

function proxyUnit(p: UserDataParams): string {
  const sync = p.policy.kind === 'gce-metadata';
  return serviceUnit('egress-proxies forward proxy', sync ? [POLICY_UNIT] : [], [
    `EnvironmentFile=${ENV_FILE_PATH}`,
    `ExecStart=${NODE} ${PROXY_PROGRAM_PATH} --env --policy ${POLICY_FILE_PATH}`,
    'DynamicUser=yes',
    ...(p.port < 1024 ? ['AmbientCapabilities=CAP_NET_BIND_SERVICE'] : []),
    'NoNewPrivileges=yes',
  ]);
}

function policyUnit(): string {
  return serviceUnit(
    'egress-proxies policy sync (instance metadata item egress-proxy-policy)',
    [],
    [`ExecStart=${NODE} ${POLICY_SYNC_PATH} ${POLICY_FILE_PATH}`, `ReadWritePaths=${BOOT_DIR}`],
  );
}

interface WriteFile {
  path: string;
  content: string;
  encoding?: 'gz+b64';
  permissions: string;
  owner: string;
}

function program(path: string, code: Uint8Array): WriteFile {
  return { path, content: gzipSync(code, { level: 9 }).toString('base64'), encoding: 'gz+b64', permissions: '0644', owner: 'root:root' };
}

/** The `#cloud-config` document for one proxy. */
export function renderUserData(p: UserDataParams): string {
  if (!Number.isInteger(p.port) || p.port < 1 || p.port > 65535) throw new ProvisioningError(`port: expected 1-65535, got ${p.port}`);
  const sync = p.policy.kind === 'gce-metadata';
  const files: WriteFile[] = [
    program(PROXY_PROGRAM_PATH, p.programs.proxy),
    ...(sync ? [program(POLICY_SYNC_PATH, p.programs.policySync)] : []),
    { path: ENV_FILE_PATH, content: envFile(p), permissions: '0600', owner: 'root:root' },
    ...(p.policy.kind === 'file' ? [{ path: POLICY_FILE_PATH, content: p.policy.document, permissions: '0644', owner: 'root:root' }] : []),
    { path: `/etc/systemd/system/${PROXY_UNIT}`, content: proxyUnit(p), permissions: '0644', owner: 'root:root' },
    ...(sync ? [{ path: `/etc/systemd/system/${POLICY_UNIT}`, content: policyUnit(), permissions: '0644', owner: 'root:root' }] : []),
  ];
  const units = [...(sync ? [POLICY_UNIT] : []), PROXY_UNIT];
  const doc = {
    package_update: true,
    packages: ['nodejs'],
    write_files: files,
    // Enabled and on disk before the proxy starts: cloud-init runs this once per instance, so a VM
    // killed soon after its first boot (its page cache lost with it) must not come back with the
    // files or the unit's enable link missing and nothing to write them again. Only then started:
    // by the time the proxy answers a probe, everything it needs survives a kill.
    runcmd: [['systemctl', 'daemon-reload'], ['systemctl', 'enable', ...units], ['sync'], ['systemctl', 'start', ...units]],
  };
  return `#cloud-config\n${stringify(doc, { lineWidth: 0 })}`;
}

/** NoCloud `meta-data`: the instance id (a new id makes cloud-init run again) and the host name. */
export function renderMetaData(instanceId: string, hostname: string): string {
  return stringify({ 'instance-id': instanceId, 'local-hostname': hostname }, { lineWidth: 0 });
}
