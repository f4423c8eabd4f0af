import { randomBytes } from 'node:crypto';
import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../errors.ts';
import { identityOf, stillRunning } from './process-info.ts';

/** Who holds a data directory: written into `<dataDir>/egress.lock`. */
export interface LockOwner {
  pid: number;
  /** Start time of the pid (clock ticks since boot, from /proc), so that a recycled pid is not taken for the owner. */
  startTicks: number | undefined;
  startedAt: string;
  host: string;
  /** How the owner was started (its command line). */
  command: string;
}

/** A second `egress up` on a data directory in use: bad usage, exit 2. */
export class DataDirInUseError extends ConfigError {
  readonly owner: LockOwner;
  constructor(dataDir: string, owner: LockOwner) {
    super(
      '--data-dir',
      `${dataDir} is in use by egress pid ${owner.pid} (started ${owner.startedAt} as "${owner.command}"); stop that process first, or give this one another --data-dir`,
    );
    this.owner = owner;
  }
}

export interface DataDirLock {
  readonly file: string;
  readonly owner: LockOwner;
  /** The owner of a stale lock this one replaced (a process that died without releasing it), if any. */
  readonly replaced: LockOwner | undefined;
  /** Removes the lock file if it is still ours. */
  release(): Promise<void>;
}

export const LOCK_FILE = 'egress.lock';

function parseOwner(text: string): LockOwner | undefined {
  try {
    const v = JSON.parse(text) as Partial<LockOwner>;
    if (typeof v.pid !== 'number' || !Number.isInteger(v.pid) || v.pid <= 0) return undefined;
    return {
      pid: v.pid,
      startTicks: typeof v.startTicks === 'number' ? v.startTicks : undefined,
      startedAt: typeof v.startedAt === 'string' ? v.startedAt : 'at an unknown time',
      host: typeof v.host === 'string' ? v.host : '',
      command: typeof v.command === 'string' ? v.command : 'unknown',
    };
  } catch {
    return undefined;
  }
}

async function readOwner(file: string): Promise<{ text: string; owner: LockOwner | undefined } | undefined> {
  try {
    const text = await readFile(file, 'utf8');
    return { text, owner: parseOwner(text) };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The owner `<dataDir>/egress.lock` names, whether or not it still runs; undefined without a readable lock. */
export async function readLockOwner(dataDir: string): Promise<LockOwner | undefined> {
  return (await readOwner(join(dataDir, LOCK_FILE)).catch(() => undefined))?.owner;
}

/**
 * Takes `<dataDir>/egress.lock` for this process. The file holds the owner's pid and start time
 * and is created atomically (written aside, then hard-linked into place, which fails if it
 * exists), so it is never seen half-written. A lock whose owner is gone (killed with -9: the
 * file stays) or whose pid now belongs to another process is stale and replaced; a live owner
 * makes this throw DataDirInUseError naming it. Node has no flock; this survives `kill -9`.
 */
export async function lockDataDir(dataDir: string, command: string): Promise<DataDirLock> {
  const file = join(dataDir, LOCK_FILE);
  const me = identityOf(process.pid);
  const owner: LockOwner = { pid: me.pid, startTicks: me.startTicks, startedAt: new Date().toISOString(), host: hostname(), command };
  const text = `${JSON.stringify(owner)}\n`;
  let replaced: LockOwner | undefined;
  for (let attempt = 0; attempt < 5; attempt++) {
    const aside = join(dataDir, `.${LOCK_FILE}.${process.pid}.${randomBytes(4).toString('hex')}`);
    await writeFile(aside, text, { mode: 0o600, flag: 'wx' });
    try {
      await link(aside, file);
      return {
        file,
        owner,
        replaced,
        async release() {
          const current = await readOwner(file);
          if (current?.text === text) await unlink(file).catch(() => undefined);
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      await unlink(aside).catch(() => undefined);
    }
    const current = await readOwner(file);
    if (current === undefined) continue; // released meanwhile: try again
    if (current.owner && stillRunning({ pid: current.owner.pid, startTicks: current.owner.startTicks })) {
      throw new DataDirInUseError(dataDir, current.owner);
    }
    // Stale (its owner died) or unreadable garbage: move it aside, and make sure what moved is
    // what was judged stale — not a fresh lock another starter put there in between.
    const stale = join(dataDir, `.${LOCK_FILE}.stale.${process.pid}.${randomBytes(4).toString('hex')}`);
    try {
      await rename(file, stale);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    const moved = await readOwner(stale);
    if (moved?.text !== current.text) {
      // Someone else's fresh lock: put it back (link never overwrites) and let the loop report it.
      await link(stale, file).catch(() => undefined);
    } else {
      replaced = current.owner;
    }
    await unlink(stale).catch(() => undefined);
  }
  const last = await readOwner(file);
  if (last?.owner) throw new DataDirInUseError(dataDir, last.owner);
  throw new ConfigError('--data-dir', `${dataDir}: could not take ${file} (other processes keep taking it)`);
}
