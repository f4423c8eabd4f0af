import { runShutdownSteps, type ShutdownStep } from './role-lifecycle.ts';

/**
 * The closes of a process, gathered as it starts its parts: each part adds the step that closes
 * it, and `close()` runs them once, last added first, every one whatever the others did. A step
 * added after the close began runs at once: a start that lost a race with the close (Redis lost
 * while a role was still starting) still closes what it made.
 */
export class ShutdownPlan {
  readonly #steps: ShutdownStep[] = [];
  #closing: Promise<Error[]> | undefined;
  readonly #late: (errors: Error[]) => void;

  /** `late`: told what failed among the steps added after the close began (nobody awaits them). */
  constructor(late: (errors: Error[]) => void) {
    this.#late = late;
  }

  /** True once `close()` was called. */
  get closing(): boolean {
    return this.#closing !== undefined;
  }

  add(step: ShutdownStep): void {
    if (this.#closing === undefined) this.#steps.push(step);
    else
      void runShutdownSteps([step]).then((errors) => {
        if (errors.length > 0) this.#late(errors);
      });
  }

  /** Runs every step once, in reverse order of adding; resolves with the errors of those that failed. Idempotent. */
  close(): Promise<Error[]> {
    this.#closing ??= runShutdownSteps(this.#steps.splice(0).reverse());
    return this.#closing;
  }
}
