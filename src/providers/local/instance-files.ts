import { randomUUID } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { InstanceOwner, ProxyCredentials } from '../lifecycle.ts';

/**
 * The on-disk layout of one local proxy instance, `<dataDir>/instances/<name>/`:
 *
 * - `intent.json`      written before the process is spawned: name, owner, placement, createdAt.
 * - `credentials.json` mode 0600, the Basic Proxy-Authorization the process requires.
 * - `instance.json`    written by the proxy process itself once it listens: the intent plus pid and port.
 * - `proxy.log`        the process's standard output and error.
 * - `egress-denials.json` written by the proxy process: its refused destinations by reason (denial-stats.ts).
 *
 * Beside `instances/`, `<dataDir>/egress-policy.json` holds the egress policy of every proxy.
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
}

export interface InstanceRecord extends IntentRecord {
  pid: number;
  port: number;
  startedAt: string;
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
  return intent;
}

export function asInstance(value: unknown): InstanceRecord | undefined {
  const intent = asIntent(value);
  if (!intent || !isRecord(value)) return undefined;
  const { pid, port, startedAt } = value;
  if (typeof pid !== 'number' || typeof port !== 'number' || typeof startedAt !== 'string') return undefined;
  return { ...intent, pid, port, startedAt };
}

export function asCredentials(value: unknown): ProxyCredentials | undefined {
  if (!isRecord(value) || typeof value.username !== 'string' || typeof value.password !== 'string') return undefined;
  return { username: value.username, password: value.password };
}
