/**
 * Work on one name done one call at a time, inside this process: each call on a name starts once
 * the previous one settled (fulfilled or rejected), calls on other names run at once. Used by the
 * local lifecycle (ensure and delete of an instance) and by the proxy host (start, reload and stop
 * of a proxy).
 */
export class NameLocks {
  /** The last call queued per name, settled; removed once nothing more is queued behind it. */
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Names with a call running or queued. */
  get size(): number {
    return this.tails.size;
  }

  run<T>(name: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(name) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.catch(() => undefined);
    this.tails.set(name, settled);
    void settled.then(() => {
      if (this.tails.get(name) === settled) this.tails.delete(name);
    });
    return next;
  }
}
