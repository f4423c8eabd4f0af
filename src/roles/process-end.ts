/**
 * What ends a process besides its roles (its Redis lost for good, the private redis-server
 * exiting): the first cause told wins, and `ended` rejects with it. Later causes are ignored, and
 * so is every cause once the process is closing on purpose.
 */
export class ProcessEnd {
  readonly ended: Promise<never>;
  #reject: (err: Error) => void = () => undefined;
  #settled = false;

  constructor() {
    this.ended = new Promise<never>((_, reject) => {
      this.#reject = reject;
    });
    // Whoever races it handles the rejection; a process that never looks must not crash on it.
    this.ended.catch(() => undefined);
  }

  /** True once a cause was told or the process said it is closing. */
  get settled(): boolean {
    return this.#settled;
  }

  fail(err: Error): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#reject(err);
  }

  /** The process is closing on purpose: what happens to Redis from now on is no failure. */
  closing(): void {
    this.#settled = true;
  }
}
