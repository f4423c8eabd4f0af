import { chmod, lstat, mkdir, readdir, realpath, stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { EgressError } from '../errors.ts';

/**
 * Directories the orchestrator trusts — it executes programs from them, or reads credentials and
 * policies from them that it hands to processes it starts — checked the way OpenSSH's StrictModes
 * checks a user's ~/.ssh:
 *
 * - every directory above the trusted one is owned by root or by the running user and is not
 *   writable by group or others, except a root-owned sticky directory (like /tmp): there nobody
 *   can replace what another user made, and the next component must be root's or ours anyway;
 * - the trusted directory itself, and everything beneath it we look at, is owned by the running
 *   user and not writable by group or others (we create directories 0700);
 * - symbolic links are resolved once, when the path is first resolved (realpath, as OpenSSH
 *   does): from then on the orchestrator uses the resolved path, and a component that is a
 *   symbolic link when the path is checked again (before an exec) is refused.
 *
 * Without a POSIX uid (Windows) nothing is checked.
 */

/** A trusted path is not safe to trust: who owns it and its mode are in the message. */
export class UnsafePathError extends EgressError {
  readonly path: string;
  /** The owner and mode found (absent when the path is missing or not a directory). */
  readonly ownerUid: number | undefined;
  readonly mode: number | undefined;
  constructor(path: string, message: string, found: { uid?: number; mode?: number; cause?: unknown } = {}) {
    super('ERR_UNSAFE_PATH', message, { cause: found.cause, retryable: false });
    this.path = path;
    this.ownerUid = found.uid;
    this.mode = found.mode;
  }
}

/** `0777`, `1777`: the permission bits as `ls -l` people write them. */
export function modeText(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

const GROUP_OR_OTHER_WRITE = 0o022;
const STICKY = 0o1000;

export interface TrustOptions {
  /** The running user (default: process.getuid()). */
  uid?: number;
}

function runningUid(options: TrustOptions): number | undefined {
  return options.uid ?? process.getuid?.();
}

function found(path: string, st: Stats, rule: string): UnsafePathError {
  return new UnsafePathError(path, `${path} is owned by uid ${st.uid} with mode ${modeText(st.mode)}; ${rule}`, { uid: st.uid, mode: st.mode & 0o7777 });
}

/** What the trusted directory itself (and everything beneath it) must be. */
function ownRule(uid: number): string {
  return `it must be owned by uid ${uid} and not writable by group or others`;
}

function aboveRule(uid: number, leaf: string): string {
  const owners = uid === 0 ? 'uid 0' : `uid 0 or uid ${uid}`;
  return `every directory above ${leaf} must be owned by ${owners} and not writable by group or others (a sticky directory owned by uid 0, like /tmp, excepted)`;
}

async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** `/a/b/c` → `['/', '/a', '/a/b', '/a/b/c']`. */
function components(path: string): string[] {
  const out: string[] = [sep];
  let current: string = sep;
  for (const part of path.split(sep).filter((p) => p.length > 0)) out.push((current = join(current, part)));
  return out;
}

/** Checks one entry beneath a trusted directory (or the trusted directory itself). */
function checkOwned(path: string, st: Stats, uid: number, directory: boolean): void {
  if (st.isSymbolicLink())
    throw new UnsafePathError(path, `${path} is a symbolic link (owned by uid ${st.uid}); a trusted path has none once resolved`, { uid: st.uid });
  if (directory && !st.isDirectory()) throw new UnsafePathError(path, `${path} is not a directory`, { uid: st.uid, mode: st.mode & 0o7777 });
  if (st.uid !== uid || (st.mode & GROUP_OR_OTHER_WRITE) !== 0) {
    const shared = st.isDirectory() && (st.mode & STICKY) !== 0 ? ' (a shared directory, like /tmp: use a directory of its own inside it)' : '';
    throw found(path, st, `${ownRule(uid)}${shared}`);
  }
}

/**
 * Checks every component of an absolute, resolved `dir` with lstat, from `/` down. With
 * `allowMissing`, a missing tail is no error (it is what we will create); otherwise `dir` must exist.
 */
async function checkChain(dir: string, uid: number, allowMissing: boolean): Promise<void> {
  const chain = components(dir);
  for (const [i, path] of chain.entries()) {
    const st = await lstatOrUndefined(path);
    if (!st) {
      if (allowMissing) return;
      throw new UnsafePathError(path, `${path} does not exist`);
    }
    if (i === chain.length - 1) return checkOwned(path, st, uid, true);
    if (st.isSymbolicLink())
      throw new UnsafePathError(path, `${path} is a symbolic link (owned by uid ${st.uid}); a trusted path has none once resolved`, { uid: st.uid });
    if (!st.isDirectory()) throw new UnsafePathError(path, `${path} is not a directory`, { uid: st.uid, mode: st.mode & 0o7777 });
    const owned = st.uid === 0 || st.uid === uid;
    const writable = (st.mode & GROUP_OR_OTHER_WRITE) !== 0;
    if (!owned || (writable && !((st.mode & STICKY) !== 0 && st.uid === 0))) throw found(path, st, aboveRule(uid, dir));
  }
}

/** `dir` made absolute with the symbolic links of its existing part resolved (the missing rest appended as it is). */
async function resolveExisting(dir: string): Promise<string> {
  const rest: string[] = [];
  for (let existing = resolve(dir); ; existing = dirname(existing)) {
    try {
      await stat(existing);
      return join(await realpath(existing), ...rest);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || existing === dirname(existing)) throw err;
      rest.unshift(basename(existing));
    }
  }
}

/** Every entry beneath `dir`, `depth` levels deep, must be ours and not writable by group or others; no symbolic links. */
async function checkTree(dir: string, uid: number, depth: number): Promise<void> {
  if (depth <= 0) return;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const st = await lstatOrUndefined(path);
    if (!st) continue; // removed meanwhile (a temporary file renamed into place)
    checkOwned(path, st, uid, false);
    if (st.isDirectory()) await checkTree(path, uid, depth - 1);
  }
}

export interface ResolveTrustedOptions extends TrustOptions {
  /** Create the missing part 0700 and take group and other bits off the directory (default false: only check what exists). */
  create?: boolean;
  /** Also check everything beneath the directory this many levels deep (default 0). */
  treeDepth?: number;
}

/**
 * Resolves `dir` (absolute, symbolic links resolved) and checks it as a trusted directory; with
 * `create`, makes it (0700) when missing. Returns the resolved path, the one to use from then on.
 * Throws UnsafePathError naming the first component that fails, its owner and mode.
 */
export async function resolveTrustedDir(dir: string, options: ResolveTrustedOptions = {}): Promise<string> {
  const resolved = await resolveExisting(dir);
  const uid = runningUid(options);
  if (uid === undefined) {
    if (options.create) await mkdir(resolved, { recursive: true, mode: 0o700 });
    return resolved;
  }
  await checkChain(resolved, uid, true);
  if (options.create) {
    await mkdir(resolved, { recursive: true, mode: 0o700 });
    // Checked again: someone may have made a component first (a race in a sticky directory).
    await checkChain(resolved, uid, false);
    const st = await lstat(resolved);
    if ((st.mode & 0o077) !== 0) await chmod(resolved, 0o700);
  }
  if (options.treeDepth && (await lstatOrUndefined(resolved))) await checkTree(resolved, uid, options.treeDepth);
  return resolved;
}

/**
 * Checks a trusted directory again (before an exec): it must exist, and every component of it
 * must pass the rules above, symbolic links refused (the path was resolved when it was first checked).
 */
export async function verifyTrustedDir(dir: string, options: TrustOptions = {}): Promise<void> {
  const uid = runningUid(options);
  if (uid !== undefined) await checkChain(resolve(dir), uid, false);
}

/**
 * `sub`, a directory directly in a verified trusted directory: made 0700 when missing, and
 * checked to be ours (not a symbolic link, not writable by group or others).
 */
export async function ensureOwnedDir(sub: string, options: TrustOptions = {}): Promise<void> {
  try {
    await mkdir(sub, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const uid = runningUid(options);
  if (uid !== undefined) checkOwned(sub, await lstat(sub), uid, true);
}

/** `file`, in a verified trusted directory, is a regular file of ours that group and others cannot write. */
export async function verifyOwnedFile(file: string, options: TrustOptions = {}): Promise<void> {
  const st = await lstat(file);
  if (!st.isFile()) throw new UnsafePathError(file, `${file} is not a regular file`, { uid: st.uid, mode: st.mode & 0o7777 });
  const uid = runningUid(options);
  if (uid !== undefined) checkOwned(file, st, uid, false);
}
