import type { ConsoleCounters } from './counters.ts';

export interface CounterHistoryOptions {
  /** How often a sample is kept (default 10 s). */
  everyMs?: number;
  /** Samples kept (default 360: an hour at 10 s). */
  keep?: number;
  /** Sampling stops when nobody has asked for this long (default 15 min), and starts again on the next ask. */
  idleMs?: number;
  now?: () => number;
}

/**
 * The history behind the console's small time series: this process's counters, sampled on a
 * timer that runs only while someone looks (it starts on the first ask, stops once nobody has
 * asked for `idleMs`, and never holds the process open).
 */
export class CounterHistory {
  readonly #read: () => Promise<ConsoleCounters>;
  readonly #everyMs: number;
  readonly #keep: number;
  readonly #idleMs: number;
  readonly #now: () => number;
  #samples: ConsoleCounters[] = [];
  #timer: NodeJS.Timeout | undefined;
  #lastAsked = 0;

  constructor(read: () => Promise<ConsoleCounters>, options: CounterHistoryOptions = {}) {
    this.#read = read;
    this.#everyMs = options.everyMs ?? 10_000;
    this.#keep = options.keep ?? 360;
    this.#idleMs = options.idleMs ?? 15 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  /** Starts sampling (a first sample now) unless it runs; either way, someone is looking. */
  async start(): Promise<void> {
    this.#lastAsked = this.#now();
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.#tick(), this.#everyMs);
    this.#timer.unref();
    await this.#tick();
  }

  /** The kept samples, oldest first, then the counters as they are now. */
  async history(): Promise<ConsoleCounters[]> {
    await this.start();
    return [...this.#samples, await this.#read()];
  }

  /** How often a sample is kept. */
  get everyMs(): number {
    return this.#everyMs;
  }

  /** Whether the sampling timer runs. */
  get sampling(): boolean {
    return this.#timer !== undefined;
  }

  /** Stops sampling (the samples stay). */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #tick(): Promise<void> {
    if (this.#now() - this.#lastAsked > this.#idleMs) {
      this.stop();
      return;
    }
    try {
      this.#push(await this.#read());
    } catch {
      // A registry that cannot be read now is sampled again on the next tick.
    }
  }

  #push(sample: ConsoleCounters): void {
    this.#samples.push(sample);
    if (this.#samples.length > this.#keep) this.#samples.splice(0, this.#samples.length - this.#keep);
  }
}
