/**
 * The claims that keep one readiness probe per proxy per interval across every worker: before a
 * probe, a worker claims the proxy for a while; a claim another worker holds means "not here".
 * A port: Redis holds the claims of a fleet (redis-probe-claims.ts), a process's memory those of
 * one process (tests, embedding).
 */
export interface ProbeClaims {
  /** Claims each proxy for `ttlMs` unless another claim on it is alive; says, name by name, which were claimed here. */
  claim(names: readonly string[], ttlMs: number): Promise<boolean[]>;
}

/** Claims in this process's memory: one claimant, so a claim fails only while an earlier one is alive. */
export class MemoryProbeClaims implements ProbeClaims {
  readonly #expiresAt = new Map<string, number>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  claim(names: readonly string[], ttlMs: number): Promise<boolean[]> {
    const now = this.#now();
    return Promise.resolve(
      names.map((name) => {
        if ((this.#expiresAt.get(name) ?? 0) > now) return false;
        this.#expiresAt.set(name, now + ttlMs);
        return true;
      }),
    );
  }
}
