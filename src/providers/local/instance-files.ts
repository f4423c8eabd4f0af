import { randomUUID } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { InstanceOwner } from '../lifecycle.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

/**
 * The on-disk layout of one local proxy instance, `<dataDir>/instances/<name>/`:
 *
 * - `intent.json`      written before the process is spawned: name, owner, placement, createdAt.
 * - `credentials.json` mode 0600, the Basic Proxy-Authorization the process requires.
 * - `instance.json`    written by what serves it (the proxy host) once it listens: the intent plus pid and port.
 * - `proxy.log`        the process's standard output and error.
 * - `egress-denials.json` written by the proxy process: its refused destinations by reason (denial-stats.ts).
 * - `deleting`         written by a deletion before it stops the proxy (DELETING_FILE).
 *
 * Beside `instances/`, `<dataDir>/egress-policy.json` holds the egress policy of every proxy,
 * `<dataDir>/host/` the proxy host's record, socket and log, and `<dataDir>/addresses/` the
 * claimed source addresses (source-addresses.ts).
 *
 * Every JSON file is written to a temporary name and renamed into place, so a reader sees
 * either the old or the new content, never half of it.
 */
export const INTENT_FILE = 'intent.json';
export const CREDENTIALS_FILE = 'credentials.json';
export const INSTANCE_FILE = 'instance.json';
export const LOG_FILE = 'proxy.log';

export interface IntentRecord {
  name: string;
  owner: InstanceOwner;
  placement?: string;
  createdAt: string;
  /** The address its outgoing connections bind (`sourceAddresses`), claimed for it. */
  sourceAddress?: string;
  /**
   * A front of an `upstream` provider: the upstream proxy it forwards through, as `scheme://host:port`
   * (never its credentials, which reach the proxy host over its control socket only).
   */
  upstream?: string;
}

export interface InstanceRecord extends IntentRecord {
  /** The process serving it: the proxy host (`host: true`), or a per-instance proxy process of the earlier model. */
  pid: number;
  port: number;
  startedAt: string;
  /** Served by the proxy host of the data directory (absent: a per-instance proxy process, the earlier model). */
  host?: true;
}

/**
 * Written by a deletion before it stops the proxy: a proxy host that restarts meanwhile does not
 * bring the proxy back, and a create of the same name removes it.
 */
export const DELETING_FILE = 'deleting';

/** `<dataDir>/host/`, mode 0700: the proxy host's record, control socket and log. */
export function hostDir(dataDir: string): string {
  return join(dataDir, 'host');
}

/** `host.json`: `{pid, startedAt, socket}`, written by the proxy host once its control socket listens. */
export const HOST_FILE = 'host.json';
export const HOST_SOCKET = 'control.sock';
export const HOST_LOG = 'host.log';

export interface HostRecord {
  pid: number;
  startedAt: string;
  socket: string;
}

export function asHostRecord(value: unknown): HostRecord | undefined {
  if (!isRecord(value)) return undefined;
  const { pid, startedAt, socket } = value;
  if (typeof pid !== 'number' || typeof startedAt !== 'string' || typeof socket !== 'string') return undefined;
  return { pid, startedAt, socket };
}

/** `<dataDir>/egress-policy.json`: the egress policy every proxy of the provider enforces (written by the worker, watched by the proxies). */
export const EGRESS_POLICY_FILE = 'egress-policy.json';

export function egressPolicyPath(dataDir: string): string {
  return join(dataDir, EGRESS_POLICY_FILE);
}

export function instancesDir(dataDir: string): string {
  return join(dataDir, 'instances');
}

export function instanceDir(dataDir: string, name: string): string {
  return join(instancesDir(dataDir), name);
}

/** Writes a file atomically (temporary file + rename): a reader sees the old or the new content whole; `mode` applies from creation on. */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644): Promise<void> {
  const tmp = `${path}.${randomUUID()}.tmp`;
  try {
    await writeFile(tmp, data, { mode, flag: 'wx' });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** Writes JSON atomically (see writeFileAtomic). */
export function writeJsonAtomic(path: string, value: unknown, mode = 0o644): Promise<void> {
  return writeFileAtomic(path, `${JSON.stringify(value)}\n`, mode);
}

/** The parsed file, or undefined when it does not exist. */
export async function readJson(path: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as unknown;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function asOwner(value: unknown): InstanceOwner | undefined {
  if (!isRecord(value) || typeof value.fleet !== 'string' || typeof value.proxy !== 'string') return undefined;
  return { fleet: value.fleet, proxy: value.proxy };
}

export function asIntent(value: unknown): IntentRecord | undefined {
  if (!isRecord(value) || typeof value.name !== 'string' || typeof value.createdAt !== 'string') return undefined;
  const owner = asOwner(value.owner);
  if (!owner) return undefined;
  const intent: IntentRecord = { name: value.name, owner, createdAt: value.createdAt };
  if (typeof value.placement === 'string') intent.placement = value.placement;
  if (typeof value.sourceAddress === 'string') intent.sourceAddress = value.sourceAddress;
  if (typeof value.upstream === 'string') intent.upstream = value.upstream;
  return intent;
}

export function asInstance(value: unknown): InstanceRecord | undefined {
  const intent = asIntent(value);
  if (!intent || !isRecord(value)) return undefined;
  const { pid, port, startedAt } = value;
  if (typeof pid !== 'number' || typeof port !== 'number' || typeof startedAt !== 'string') return undefined;
  return { ...intent, pid, port, startedAt, ...(value.host === true ? { host: true as const } : {}) };
}

export function asCredentials(value: unknown): ProxyCredentials | undefined {
  if (!isRecord(value) || typeof value.username !== 'string' || typeof value.password !== 'string') return undefined;
  return { username: value.username, password: value.password };
}

/** The last five lines of a log file ('' when there is none). */
export async function logTail(file: string): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.trimEnd().split('\n').slice(-5).join('\n');
  } catch {
    return '';
  }
}
