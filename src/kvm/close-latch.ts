/**
 * Records why something closed, once, and tells every listener — also those that subscribe
 * afterwards (asynchronously, at once). Shared by the SSH session and the host connection.
 */
export class CloseLatch {
  #reason: Error | undefined;
  readonly #listeners: ((reason: Error) => void)[] = [];

  get closed(): boolean {
    return this.#reason !== undefined;
  }

  get reason(): Error | undefined {
    return this.#reason;
  }

  onClose(listener: (reason: Error) => void): void {
    const reason = this.#reason;
    if (reason) queueMicrotask(() => listener(reason));
    else this.#listeners.push(listener);
  }

  /**
   * Latches `reason`, runs `teardown` (already closed by then, so re-entrant calls are no-ops),
   * then notifies. Does nothing when already closed.
   */
  close(reason: Error, teardown?: () => void): void {
    if (this.#reason) return;
    this.#reason = reason;
    teardown?.();
    for (const l of this.#listeners.splice(0)) l(reason);
  }
}
