import type { Logger } from '../../logging.ts';
import type { InstanceExit, InstanceOwner } from '../lifecycle.ts';

/** One proxy whose serving process is watched: the proxy host (shared by many proxies) or a per-instance proxy process of the earlier model. */
export interface WatchedProxy {
  name: string;
  owner: InstanceOwner;
  /** The instance id reported with the exit (`Instance.id`). */
  id: string;
  /** The process serving it. */
  pid: number;
  /** Whether `pid` still runs our program for this data directory or instance (through /proc): a zombie or a reused pid is an exit too. */
  isOurs: () => Promise<boolean>;
  /** The message of its exit, e.g. `proxy host 123 exited`. */
  exitMessage: string;
}

export interface ExitWatchOptions {
  /** How often every watched pid is looked at with `kill(pid, 0)` (default 200 ms). */
  pollMs?: number;
  /** Every this many polls, /proc confirms each pid still runs our program: a zombie or a reused pid is an exit too (default 10). */
  confirmEvery?: number;
  /**
   * A confirmation this process could not make (out of descriptors or memory: ObserverResourceError).
   * It is no exit: the round stops there and the next one looks again.
   */
  onObserverError?: (err: Error) => void;
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
 * Notices at once when the process serving a local proxy exits — the proxy host, which serves every
 * proxy of the data directory (its exit is an exit of each of them until a new host brings them
 * back), or a per-instance proxy process of the earlier model — whether this worker spawned it or
 * adopted it from an earlier worker run (it cannot `wait()` on those): one timer polls every watched
 * pid once with `kill(pid, 0)`, a system call that costs well under a microsecond, and every
 * `confirmEvery` polls checks /proc that each pid still runs our program (a zombie has no command
 * line; a pid reused by another program is not ours). A process this worker spawned also reports
 * through its `exit` event (`check`). Deleting an instance unwatches it first, so a deletion is never
 * reported as an exit.
 */
export class ExitWatch {
  readonly #watched = new Map<string, WatchedProxy>();
  readonly #listeners = new Set<(exit: InstanceExit, proxy: WatchedProxy) => void>();
  readonly #pollMs: number;
  readonly #confirmEvery: number;
  readonly #onObserverError: (err: Error) => void;
  #timer: NodeJS.Timeout | undefined;
  #round = 0;
  #confirming = false;

  constructor(options: ExitWatchOptions = {}) {
    this.#pollMs = options.pollMs ?? 200;
    this.#confirmEvery = options.confirmEvery ?? 10;
    this.#onObserverError = options.onObserverError ?? (() => undefined);
  }

  get size(): number {
    return this.#watched.size;
  }

  subscribe(listener: (exit: InstanceExit, proxy: WatchedProxy) => void): () => void {
    this.#listeners.add(listener);
    this.#arm();
    return () => {
      this.#listeners.delete(listener);
      this.#arm();
    };
  }

  watch(p: WatchedProxy): void {
    const current = this.#watched.get(p.name);
    if (current?.pid === p.pid && current.id === p.id) return;
    this.#watched.set(p.name, p);
    this.#arm();
  }

  unwatch(name: string): void {
    this.#watched.delete(name);
    this.#arm();
  }

  /** Looks at one pid now (a spawned child's `exit` event). */
  check(pid: number): void {
    if (alive(pid)) return;
    for (const p of [...this.#watched.values()]) if (p.pid === pid) this.#exited(p, p.exitMessage);
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
    const verdict = new Map<number, boolean>();
    for (const p of [...this.#watched.values()]) {
      let live = verdict.get(p.pid);
      if (live === undefined) verdict.set(p.pid, (live = alive(p.pid)));
      if (!live && this.#watched.get(p.name) === p) this.#exited(p, p.exitMessage);
    }
    if (++this.#round % this.#confirmEvery === 0 && !this.#confirming) void this.#confirm();
  }

  async #confirm(): Promise<void> {
    this.#confirming = true;
    try {
      const verdict = new Map<number, boolean>();
      for (const p of [...this.#watched.values()]) {
        if (this.#watched.get(p.name) !== p) continue;
        let ours = verdict.get(p.pid);
        if (ours === undefined) {
          try {
            ours = await p.isOurs();
          } catch (err) {
            // Our own resources ran out (EMFILE reading /proc): that says nothing about the process.
            this.#onObserverError(err as Error);
            return;
          }
          verdict.set(p.pid, ours);
        }
        // A zombie (killed, not yet reaped) or a pid now running another program: ours exited,
        // and is reported as the `exit` event or the kill(0) poll would have (whichever is first).
        if (!ours && this.#watched.get(p.name) === p) this.#exited(p, p.exitMessage);
      }
    } finally {
      this.#confirming = false;
    }
  }

  /** Reports the exit of a process found dead without having been watched (one that died while no worker ran). */
  report(p: WatchedProxy, message: string): void {
    this.#exited(p, message);
  }

  #exited(p: WatchedProxy, message: string): void {
    if (this.#watched.get(p.name) === p) this.#watched.delete(p.name);
    this.#arm();
    const exit: InstanceExit = { name: p.name, owner: p.owner, id: p.id, message };
    for (const listener of this.#listeners) listener(exit, p);
  }

  close(): void {
    this.#listeners.clear();
    this.#watched.clear();
    this.#arm();
  }
}

/** ExitWatch's `onObserverError`: tells `count`, and warns once a minute (a flood would otherwise log at the poll rate). */
export function observerWarning(logger: Logger, count?: (err: Error) => void): (err: Error) => void {
  let last = -Infinity;
  return (err) => {
    count?.(err);
    if (performance.now() - last < 60_000) return;
    last = performance.now();
    logger.warn({ err: err.message }, 'could not confirm that the proxy host runs (out of own resources); no proxy is taken for exited (logged once a minute)');
  };
}
