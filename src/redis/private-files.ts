import { randomBytes } from 'node:crypto';
import { chmod, lstat, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EgressError } from '../errors.ts';
import { resolveTrustedDir } from '../fs/private-path.ts';

/**
 * Files only this user may read: the data directory holds the private Redis's password and
 * append-only files (every proxy's credentials), so directories are 0700 and files 0600.
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Creates `dir` (and missing parents) 0700, and tightens it to 0700 if it already existed with
 * group or other read bits. A directory that cannot be trusted — another user's, writable by
 * group or others (sticky, like /tmp, included), or below a directory that is (src/fs/private-path.ts)
 * — is refused (UnsafePathError) rather than changed.
 */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await resolveTrustedDir(dir, { create: true });
}

/**
 * Takes group and other permissions away from everything under `dir` (files written by an
 * earlier release with the default umask: 0644 append-only files). Symbolic links are left alone.
 * Returns the paths it changed.
 */
export async function tightenTree(dir: string): Promise<string[]> {
  const changed: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    const st = await lstat(path);
    if (entry.isDirectory()) {
      if ((st.mode & 0o077) !== 0) {
        await chmod(path, PRIVATE_DIR_MODE);
        changed.push(path);
      }
      changed.push(...(await tightenTree(path)));
    } else if (entry.isFile() && (st.mode & 0o077) !== 0) {
      await chmod(path, st.mode & 0o700);
      changed.push(path);
    }
  }
  return changed;
}

/**
 * A secret kept in a 0600 file: read when it exists (and its mode tightened), otherwise
 * generated (32 random bytes, base64url) and written with `wx`, so two starters never write
 * two different secrets.
 */
export async function readOrCreateSecret(file: string): Promise<string> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const secret = (await readFile(file, 'utf8')).trim();
      if (secret.length < 16) throw new EgressError('ERR_DATA_DIR', `${file} holds no usable secret (delete it to have a new one generated)`);
      const st = await lstat(file);
      if ((st.mode & 0o077) !== 0) await chmod(file, PRIVATE_FILE_MODE);
      return secret;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    try {
      await writeFile(file, `${randomBytes(32).toString('base64url')}\n`, { mode: PRIVATE_FILE_MODE, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  throw new EgressError('ERR_DATA_DIR', `cannot read or create ${file}`);
}
