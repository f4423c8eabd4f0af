/**
 * The Redis keys of picking and feedback, all under the fleet's hash-tagged prefix (`{egress}`),
 * so every key of every script hashes to one Redis Cluster slot.
 *
 * - `<prefix>:pick:<pool>:lru` sorted set of the pool's Ready members, member → the sequence number of its last pick (round-robin; 0: never);
 * - `<prefix>:pick:<pool>:members` string, the version (a hash) of the member list the sorted set holds;
 * - `<prefix>:pick:<pool>:session:<session>` string, the member a session holds, expiring after the session TTL;
 * - `<prefix>:pick:<pool>:sessions` sorted set, each session's key → when it expires (epoch ms): the pool's live sessions, counted without a scan;
 * - `<prefix>:pick:<pool>:blocked:<domain>` sorted set, member → until (epoch ms) it is not picked for that domain;
 * - `<prefix>:pick:<pool>:demand` hash, an autoscaled pool's picks: `picks` (a counter), `last` (the last pick, epoch ms by Redis's clock), `woke` (the last wake of an empty pool);
 * - `<prefix>:pick:<pool>:budget` string, `<stop 0|1> <limit> <window>` while the pool's budget is spent, expiring when its window turns;
 * - `<prefix>:feedback:<proxy>:domains` sorted set, domain → when the proxy was last reported blocked there (the replacement window);
 * - `<prefix>:feedback-rate:<caller>` hash, one token bucket per API token (by its name, never the token).
 */
export class PickKeys {
  constructor(readonly prefix: string) {}

  lru(pool: string): string {
    return `${this.prefix}:pick:${pool}:lru`;
  }

  memberVersion(pool: string): string {
    return `${this.prefix}:pick:${pool}:members`;
  }

  session(pool: string, session: string): string {
    return `${this.prefix}:pick:${pool}:session:${session}`;
  }

  sessions(pool: string): string {
    return `${this.prefix}:pick:${pool}:sessions`;
  }

  blocked(pool: string, domain: string): string {
    return `${this.prefix}:pick:${pool}:blocked:${domain}`;
  }

  demand(pool: string): string {
    return `${this.prefix}:pick:${pool}:demand`;
  }

  budget(pool: string): string {
    return `${this.prefix}:pick:${pool}:budget`;
  }

  blockedDomains(proxy: string): string {
    return `${this.prefix}:feedback:${proxy}:domains`;
  }

  rate(caller: string): string {
    return `${this.prefix}:feedback-rate:${caller}`;
  }
}
