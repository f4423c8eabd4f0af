import type { MemberReplacements, ReplacementRequest } from './member-replacements.ts';
import { run } from './memory-collection.ts';

/**
 * Member replacement requests in this process's memory: the MemberReplacements contract without
 * Redis, for pure tests and embedding. As RedisMemberReplacements: the first request for a member
 * wins (a second resolves false and changes nothing), lists hand out copies, and a call whose
 * signal has ended rejects and writes nothing.
 */
export class MemoryMemberReplacements implements MemberReplacements {
  readonly #pools = new Map<string, Map<string, ReplacementRequest>>();
  readonly #now: () => Date;

  constructor(now: () => Date = () => new Date()) {
    this.#now = now;
  }

  request(pool: string, member: string, reason: string, signal?: AbortSignal): Promise<boolean> {
    return run(signal, () => {
      const requests = this.#pools.get(pool) ?? new Map<string, ReplacementRequest>();
      if (requests.has(member)) return false;
      requests.set(member, { reason, requestedAt: this.#now().toISOString() });
      this.#pools.set(pool, requests);
      return true;
    });
  }

  list(pool: string, signal?: AbortSignal): Promise<Map<string, ReplacementRequest>> {
    return run(signal, () => new Map([...(this.#pools.get(pool) ?? [])].map(([member, request]) => [member, { ...request }])));
  }

  clear(pool: string, members: readonly string[], signal?: AbortSignal): Promise<void> {
    return run(signal, () => {
      const requests = this.#pools.get(pool);
      if (!requests) return;
      for (const member of members) requests.delete(member);
      if (requests.size === 0) this.#pools.delete(pool);
    });
  }
}
