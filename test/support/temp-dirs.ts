import { mkdtempSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made = new Set<string>();

/**
 * A fresh directory under the run's TMPDIR, removed after the test file that made it (by
 * test/support/temp-dirs-cleanup.ts, a setup file whose afterAll runs after the file's own
 * hooks have stopped whatever used the directory).
 */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  made.add(dir);
  return dir;
}

/** `tempDir` for synchronous callers (testConfig's data directory). */
export function tempDirSync(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.add(dir);
  return dir;
}

/** Removes every directory `tempDir`/`tempDirSync` made in this test file. */
export async function removeTempDirs(): Promise<void> {
  const dirs = [...made];
  made.clear();
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true, maxRetries: 3 })));
}
