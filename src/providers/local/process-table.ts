import { readdir, readFile } from 'node:fs/promises';

/**
 * Identifies local proxy processes through /proc, so that nothing but our own proxy process
 * is ever signalled: a pid recorded in a state file may have been reused by the time we read it.
 */

/** Waits `ms`; on abort rejects with the signal's reason (like `throwIfAborted`), not a generic AbortError. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const fail = (): void => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted', { cause: signal.reason }));
    if (signal.aborted) return fail();
    const onAbort = (): void => {
      clearTimeout(timer);
      fail();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The command-line arguments of a live process; undefined when it is gone or a zombie. */
async function cmdline(pid: number): Promise<string[] | undefined> {
  try {
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    // A zombie (exited, not yet reaped) has an empty command line: it is gone for our purposes.
    if (raw.length === 0) return undefined;
    return raw.split('\0').filter((arg) => arg.length > 0);
  } catch {
    return undefined;
  }
}

/** True when `pid` is alive and runs `script` for `instanceDir` (its last two arguments). */
export async function isProxyProcess(pid: number, script: string, instanceDir: string): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const args = await cmdline(pid);
  if (!args) return false;
  const i = args.indexOf(script);
  return i >= 0 && args[i + 1] === instanceDir;
}

/** Every live process that runs `script` for `instanceDir` (normally none or one). */
export async function findProxyProcesses(script: string, instanceDir: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (await isProxyProcess(pid, script, instanceDir)) found.push(pid);
  }
  return found;
}

/**
 * Waits until `pid` no longer runs our proxy for `instanceDir`, polling /proc (a detached process
 * that another worker started gives us no exit event). Rejects with the signal's reason on abort.
 */
export async function waitUntilGone(pid: number, script: string, instanceDir: string, signal: AbortSignal, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (let every = 5; ; every = Math.min(every * 2, 50)) {
    signal.throwIfAborted();
    if (!(await isProxyProcess(pid, script, instanceDir))) return true;
    if (performance.now() > deadline) return false;
    await pause(every, signal);
  }
}
