import type { Job } from 'bullmq';

/** Signals for one kind of job's deadlines: each `signal()` ends about `ms` after it was asked for, or with the consumer's cancellation. */
export interface DeadlineSource {
  signal(): AbortSignal;
}

/**
 * Makes a kind of job's deadline source from the consumer's cancellation and the deadline in ms.
 * The project's is `SharedDeadlines` (src/abort.ts): jobs whose deadline starts within the same
 * 50 ms share one signal, whose reason is a DeadlineError.
 */
export type DeadlineSources = (cancellation: AbortSignal, ms: number) => DeadlineSource;

/**
 * What a handler gets besides its validated payload. `W` is the way a handler asks for more work
 * (the domain's work-requests port, src/work/work-requests.ts): queues/ names no type of the
 * domain, so the consumer's owner says what it is and every handler of that consumer gets the same.
 */
export interface JobContext<W = unknown> {
  readonly job: Job;
  /** How this handler asks for more work (a reconcile, a pool's look…): the consumer's `work`. */
  readonly work: W;
  /**
   * The job's own signal: ends when the job is cancelled (the consumer's shutdown, after its grace
   * period). Made when first read and released when the job ends, so a job that only needs
   * `cancelled` or `deadline` costs no AbortController of its own.
   */
  readonly signal: AbortSignal;
  /** Why the job was cancelled, when it was (`{ reason }`); undefined while it may go on. */
  cancelled(): { reason: unknown } | undefined;
  /**
   * Runs `work` under the job's deadline (its definition's `deadlineMs`), which also ends with the
   * job's cancellation; the deadline starts when this is called (give or take the source's
   * granularity), so a handler that first waits for a slot does not spend its deadline there.
   * Without a deadline in the definition: the job's signal.
   */
  deadline<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T>;
}

/**
 * One running job's context. A class, not an object of closures: a check makes one per job, and
 * its methods live once on the prototype. Call `release` when the job ends.
 */
export class RunningJob<W> implements JobContext<W> {
  readonly job: Job;
  readonly work: W;
  readonly #cancellation: AbortSignal;
  readonly #deadlines: DeadlineSource | undefined;
  #own: { controller: AbortController; onAbort: () => void } | undefined;
  #released = false;

  constructor(job: Job, work: W, cancellation: AbortSignal, deadlines: DeadlineSource | undefined) {
    this.job = job;
    this.work = work;
    this.#cancellation = cancellation;
    this.#deadlines = deadlines;
  }

  get signal(): AbortSignal {
    if (this.#own) return this.#own.controller.signal;
    const controller = new AbortController();
    const parent = this.#cancellation;
    const onAbort = (): void => controller.abort(parent.reason);
    if (parent.aborted) controller.abort(parent.reason);
    // Read after the job ended (by work it left running), it no longer follows the cancellation: nothing would remove the listener.
    else if (!this.#released) parent.addEventListener('abort', onAbort, { once: true });
    this.#own = { controller, onAbort };
    return controller.signal;
  }

  cancelled(): { reason: unknown } | undefined {
    return this.#cancellation.aborted ? { reason: this.#cancellation.reason } : undefined;
  }

  deadline<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return work(this.#deadlines ? this.#deadlines.signal() : this.signal);
  }

  /** The job ended: its own signal (if it was made) stops listening to the consumer's cancellation. */
  release(): void {
    this.#released = true;
    if (this.#own) this.#cancellation.removeEventListener('abort', this.#own.onAbort);
  }
}
