/**
 * A local instance's state in its directory (`<dataDir>/instances/<name>/`), as the local
 * lifecycle reads and writes it: its intent and credentials, the record of the process serving
 * it, the egress policy every proxy of the data directory follows, and how a gone instance is told.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../logging.ts';
import type { InstanceSpec } from '../lifecycle.ts';
import type { WatchedProxy } from './exit-watch.ts';
import { LocalInstanceError } from './instance-error.ts';
import {
  asCredentials,
  asInstance,
  asIntent,
  CREDENTIALS_FILE,
  egressPolicyPath,
  HOST_LOG,
  hostDir,
  INSTANCE_FILE,
  INTENT_FILE,
  logTail,
  readJson,
  writeFileAtomic,
  writeJsonAtomic,
  type InstanceRecord,
  type IntentRecord,
} from './instance-files.ts';
import { isLegacyRecord, legacyInstanceId, legacyLogFile } from './legacy-proxies.ts';
import { isHostProcess } from './process-table.ts';
import type { SourceAddressPool } from './source-addresses.ts';

export const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export function sameOwner(a: IntentRecord, b: InstanceSpec): boolean {
  return a.owner.fleet === b.owner.fleet && a.owner.proxy === b.owner.proxy;
}

/** An instance's id: the serving host's pid and the proxy's port (a restarted host or a re-created proxy is a new instance). */
export function hostInstanceId(record: InstanceRecord): string {
  return `${record.pid}:${record.port}`;
}

/**
 * Writes the egress policy `document` (policy-document.ts) when it differs from what the file holds, once
 * per lifecycle (see `LocalLifecycle.writeEgressPolicy`); a failed write is tried again by the next call.
 */
export function egressPolicyWriter(dataDir: string, document: string, logger: Logger): () => Promise<void> {
  const file = egressPolicyPath(dataDir);
  const text = `${document}\n`;
  let written: Promise<void> | undefined;
  return () => {
    written ??= (async () => {
      await mkdir(dataDir, { recursive: true, mode: 0o700 });
      const existing = await readFile(file, 'utf8').catch(() => undefined);
      if (existing === text) return;
      await writeFileAtomic(file, text, 0o600);
      logger.info({ file }, 'egress policy written for the local proxies');
    })().catch((err: unknown) => {
      written = undefined;
      throw new LocalInstanceError(`could not write the egress policy ${file}: ${(err as Error).message}`, { cause: err });
    });
    return written;
  };
}

export async function readState(dir: string): Promise<{ intent?: IntentRecord; record?: InstanceRecord }> {
  const intent = asIntent(await readJson(join(dir, INTENT_FILE)));
  const record = asInstance(await readJson(join(dir, INSTANCE_FILE)));
  return { intent, record };
}

/**
 * Records what the proxy is to be in its instance directory: its intent (made now for a new one,
 * with the source address it claims) and its credentials (written only when they changed).
 */
export async function recordIntent(
  dir: string,
  spec: InstanceSpec,
  existing: IntentRecord | undefined,
  addresses: SourceAddressPool | undefined,
  signal: AbortSignal,
  log: Logger,
  upstream?: string,
): Promise<{ intent: IntentRecord; credentialsChanged: boolean }> {
  let intent: IntentRecord = existing ?? {
    name: spec.name,
    owner: spec.owner,
    createdAt: new Date().toISOString(),
    ...(spec.placement === undefined ? {} : { placement: spec.placement }),
    // A front is one from its first record: a host that restarts never serves it as a plain proxy.
    ...(upstream === undefined ? {} : { upstream }),
  };
  if (addresses) {
    const address = await addresses.claim(spec.name, intent.sourceAddress, signal);
    if (address !== intent.sourceAddress) {
      intent = { ...intent, sourceAddress: address };
      await writeJsonAtomic(join(dir, INTENT_FILE), intent);
      log.info({ dir, sourceAddress: address }, 'local instance intent recorded');
    }
  }
  if (!(await readJson(join(dir, INTENT_FILE)))) {
    await writeJsonAtomic(join(dir, INTENT_FILE), intent);
    log.info({ dir }, 'local instance intent recorded');
  }
  const stored = asCredentials(await readJson(join(dir, CREDENTIALS_FILE)));
  const credentialsChanged = !stored || stored.username !== spec.credentials.username || stored.password !== spec.credentials.password;
  if (credentialsChanged) await writeJsonAtomic(join(dir, CREDENTIALS_FILE), spec.credentials, 0o600);
  return { intent, credentialsChanged };
}

/** An instance whose process is gone (or never ran): its id and why, with the last lines of the log it wrote. */
export async function failure(
  dataDir: string,
  dir: string,
  intent: IntentRecord,
  record: InstanceRecord | undefined,
): Promise<{ id: string; message: string }> {
  const legacy = record !== undefined && isLegacyRecord(record);
  const tail = await logTail(legacy ? legacyLogFile(dir) : join(hostDir(dataDir), HOST_LOG));
  const lines = tail ? `; last log lines:\n${tail}` : '';
  if (!record) return { id: '', message: `proxy was never started (intent recorded at ${intent.createdAt})${lines}` };
  return legacy
    ? { id: legacyInstanceId(record), message: `proxy process ${record.pid} is no longer running${lines}` }
    : { id: hostInstanceId(record), message: `proxy host ${record.pid} is no longer running${lines}` };
}

/** What the exit watch looks at for an instance the proxy host serves: the host process. */
export function hostedWatched(dataDir: string, intent: IntentRecord, record: InstanceRecord): WatchedProxy {
  return {
    name: intent.name,
    owner: intent.owner,
    id: hostInstanceId(record),
    pid: record.pid,
    isOurs: () => isHostProcess(record.pid, dataDir),
    exitMessage: `proxy host ${record.pid} exited`,
  };
}
