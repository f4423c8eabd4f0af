import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { RedisClient } from '../redis/connections.ts';
import type { Logger } from '../logging.ts';

/** Extends the lease only if we still hold it. KEYS[1] lease key; ARGV[1] holder id, ARGV[2] ms. */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
/** Deletes the lease only if we still hold it. KEYS[1] lease key; ARGV[1] holder id. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/** How long handing the lease back may take at most. */
const RELEASE_BOUND_MS = 2000;

export interface LeaseEvents {
  acquired: [];
  lost: [];
}

/**
 * A leadership lease in Redis: `SET key id NX PX ms`, renewed at a third of its length by
 * whoever holds it, tried at the same pace by standbys. A holder that dies stops renewing and
 * a standby takes over at most `leaseMs` (plus one try interval) later.
 */
export class Lease extends EventEmitter<LeaseEvents> {
  readonly id = randomUUID();
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #leaseMs: number;
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | undefined;
  #held = false;
  #stopped = false;

  constructor(redis: RedisClient, key: string, leaseMs: number, logger: Logger) {
    super();
    this.#redis = redis;
    this.#key = key;
    this.#leaseMs = leaseMs;
    this.#logger = logger;
  }

  get held(): boolean {
    return this.#held;
  }

  start(): void {
    void this.#tick();
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    try {
      if (this.#held) {
        const renewed = await this.#redis.eval(RENEW, 1, this.#key, this.id, String(this.#leaseMs));
        if (renewed !== 1) this.#setHeld(false);
      } else {
        const got = await this.#redis.set(this.#key, this.id, 'PX', this.#leaseMs, 'NX');
        if (got === 'OK' && this.#stopped) await this.#redis.eval(RELEASE, 1, this.#key, this.id);
        else if (got === 'OK') this.#setHeld(true);
      }
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'lease renewal failed');
      // Without Redis we cannot know whether we still hold it: act as if we do not.
      if (this.#held) this.#setHeld(false);
    }
    // The holder renews at a third of the lease; a standby asks every second at most, so a
    // lease handed back at shutdown is taken over promptly even when leases are long.
    const every = this.#held ? this.#leaseMs / 3 : Math.min(this.#leaseMs / 3, 1000);
    if (!this.#stopped) this.#timer = setTimeout(() => void this.#tick(), Math.max(50, Math.floor(every)));
  }

  #setHeld(held: boolean): void {
    if (this.#held === held || this.#stopped) return;
    this.#held = held;
    this.emit(held ? 'acquired' : 'lost');
  }

  /**
   * Stops renewing and hands the lease back so a standby can take over at once. Bounded: when
   * Redis does not answer within the lease's length (2 s at most) it rejects saying so, and the
   * lease, no longer renewed, expires by itself.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    if (!this.#held) return;
    this.#held = false;
    const boundMs = Math.min(this.#leaseMs, RELEASE_BOUND_MS);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), boundMs);
    });
    const released = this.#redis.eval(RELEASE, 1, this.#key, this.id).then(
      () => 'released' as const,
      (err: unknown) => err as Error,
    );
    try {
      const outcome = await Promise.race([released, late]);
      if (outcome === 'released') return;
      const why = outcome === 'late' ? `Redis did not answer within ${boundMs} ms` : outcome.message;
      throw new Error(`the scheduler lease was not handed back (${why}): a standby takes over once it expires, within ${this.#leaseMs} ms`);
    } finally {
      clearTimeout(timer);
    }
  }
}
