import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Logger } from './logging.ts';

/** The soft and hard limits on open files of a process, from `/proc/<pid>/limits` (`unlimited` as Infinity). */
export interface OpenFilesLimit {
  soft: number;
  hard: number;
}

export async function readOpenFilesLimit(pid: number | 'self' = 'self'): Promise<OpenFilesLimit | undefined> {
  const text = await readFile(`/proc/${pid}/limits`, 'utf8').catch(() => '');
  const line = text.split('\n').find((l) => l.startsWith('Max open files'));
  const [, soft, hard] = line?.split(/\s{2,}/) ?? [];
  const value = (v: string | undefined): number => (v === 'unlimited' ? Infinity : Number(v));
  const limit = { soft: value(soft), hard: value(hard) };
  return Number.isNaN(limit.soft) || Number.isNaN(limit.hard) ? undefined : limit;
}

function prlimit(pid: number, hard: number, signal: AbortSignal): Promise<void> {
  const value = hard === Infinity ? 'unlimited' : String(hard);
  return new Promise((resolve, reject) => {
    execFile('prlimit', ['--pid', String(pid), `--nofile=${value}:${value}`], { signal }, (err) =>
      err ? reject(new Error(err.message, { cause: err })) : resolve(),
    );
  });
}

/**
 * Best effort, at start: raises the process's soft limit on open files to its hard limit (node
 * normally does this itself as it starts; a process started otherwise may not have), through
 * util-linux's `prlimit` on its own pid since node has no setrlimit. Logs the limit at info, or
 * at warn when it could not be raised. Returns the soft limit in force, which the listeners'
 * connection caps are derived from (undefined when it cannot be read: no /proc).
 */
export async function raiseOpenFilesLimit(logger: Logger, signal: AbortSignal = AbortSignal.timeout(5000)): Promise<number | undefined> {
  const before = await readOpenFilesLimit();
  if (!before) {
    logger.warn('could not read the open-files limit (/proc/self/limits): connection caps are not tied to it');
    return undefined;
  }
  if (before.soft >= before.hard) {
    logger.info({ openFiles: before.soft }, 'open-files limit');
    return before.soft;
  }
  try {
    await prlimit(process.pid, before.hard, signal);
  } catch (err) {
    logger.warn({ soft: before.soft, hard: before.hard, err: (err as Error).message }, 'could not raise the open-files soft limit to the hard limit (prlimit)');
    return before.soft;
  }
  const after = (await readOpenFilesLimit()) ?? before;
  logger.info({ from: before.soft, openFiles: after.soft }, 'open-files soft limit raised to the hard limit');
  return after.soft;
}
