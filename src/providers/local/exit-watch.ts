import type { InstanceExit, InstanceOwner } from '../lifecycle.ts';
import { isProxyProcess } from './process-table.ts';

export interface WatchedProcess {
  pid: number;
  /** The instance directory (the argument after the program in its command line). */
  dir: string;
  name: string;
  owner: InstanceOwner;
}

export interface ExitWatchOptions {
  /** How often every watched pid is looked at with `kill(pid, 0)` (default 200 ms). */
  pollMs?: number;
  /** Every this many polls, /proc confirms each pid still runs our program: a zombie or a reused pid is an exit too (default 10). */
  confirmEvery?: number;
}

/** True while `pid` exists (EPERM: it exists, owned by someone else). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Notices at once when a local proxy process exits, whether this worker spawned it or adopted it
 * from an earlier worker run (it cannot `wait()` on those): one timer polls every watched pid with
 * `kill(pid, 0)`, a system call that costs well under a microsecond, and every `confirmEvery` polls
 * checks /proc that the pid still runs our proxy program for the instance (a zombie has no command
 * line; a pid reused by another program is not ours). A process this worker spawned also reports
 * through its `exit` event (`check`). Deleting an instance unwatches it first, so a deletion is never
 * reported as an exit.
 */
export class ExitWatch {
  readonly #watched = new Map<number, WatchedProcess>();
  readonly #listeners = new Set<(exit: InstanceExit) => void>();
  readonly #pollMs: number;
  readonly #confirmEvery: number;
  #timer: NodeJS.Timeout | undefined;
  #round = 0;
  #confirming = false;

  constructor(options: ExitWatchOptions = {}) {
    this.#pollMs = options.pollMs ?? 200;
    this.#confirmEvery = options.confirmEvery ?? 10;
  }

  get size(): number {
    return this.#watched.size;
  }

  subscribe(listener: (exit: InstanceExit) => void): () => void {
    this.#listeners.add(listener);
    this.#arm();
    return () => {
      this.#listeners.delete(listener);
      this.#arm();
    };
  }

  watch(p: WatchedProcess): void {
    if (this.#watched.get(p.pid)?.dir === p.dir) return;
    this.#watched.set(p.pid, p);
    this.#arm();
  }

  unwatch(pid: number): void {
    this.#watched.delete(pid);
    this.#arm();
  }

  /** Looks at one pid now (a spawned child's `exit` event). */
  check(pid: number): void {
    const p = this.#watched.get(pid);
    if (p && !alive(pid)) this.#exited(p, `proxy process ${pid} exited`);
  }

  /** The timer runs only while someone listens and something is watched; it never keeps the process alive. */
  #arm(): void {
    const wanted = this.#listeners.size > 0 && this.#watched.size > 0;
    if (wanted && !this.#timer) {
      this.#timer = setInterval(() => this.#poll(), this.#pollMs);
      this.#timer.unref();
    } else if (!wanted && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  #poll(): void {
    for (const p of [...this.#watched.values()]) if (!alive(p.pid)) this.#exited(p, `proxy process ${p.pid} exited`);
    if (++this.#round % this.#confirmEvery === 0 && !this.#confirming) void this.#confirm();
  }

  async #confirm(): Promise<void> {
    this.#confirming = true;
    try {
      for (const p of [...this.#watched.values()]) {
        if (this.#watched.get(p.pid) !== p) continue;
        // A zombie (killed, not yet reaped) or a pid now running another program: ours exited,
        // and is reported as the `exit` event or the kill(0) poll would have (whichever is first).
        if (!(await isProxyProcess(p.pid, p.dir)) && this.#watched.get(p.pid) === p) this.#exited(p, `proxy process ${p.pid} exited`);
      }
    } finally {
      this.#confirming = false;
    }
  }

  /** Reports the exit of a process found dead without having been watched (one that died while no worker ran). */
  report(p: WatchedProcess, message: string): void {
    this.#exited(p, message);
  }

  #exited(p: WatchedProcess, message: string): void {
    this.#watched.delete(p.pid);
    this.#arm();
    const exit: InstanceExit = { name: p.name, owner: p.owner, id: String(p.pid), message };
    for (const listener of this.#listeners) listener(exit);
  }

  close(): void {
    this.#listeners.clear();
    this.#watched.clear();
    this.#arm();
  }
}
