import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** One signed-in browser: who it is (its token's name, never the token) and its CSRF token. */
export interface ConsoleSession {
  readonly caller: string;
  /** Sent back by the page in `X-Egress-Csrf` with every API request; checked in constant time. */
  readonly csrf: string;
  readonly expiresAt: number;
}

export interface ConsoleSessionOptions {
  /** How long a session lasts after sign-in (default 12 h). */
  ttlMs?: number;
  /** At most this many sessions at once; the oldest is signed out to make room (default 1000). */
  maxSessions?: number;
  now?: () => number;
}

function digest(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

function sameText(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db);
}

/** Session ids are 32 random bytes, base64url: anything else is not one (and is not looked up). */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

/**
 * The console's sessions, in this API process's memory: the cookie holds a random id (the map is
 * keyed by its sha256, so a heap dump holds no usable id), never the API token. A restart signs
 * everyone out; sessions are not shared between API replicas.
 */
export class ConsoleSessions {
  readonly #byDigest = new Map<string, ConsoleSession>();
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #now: () => number;

  constructor(options: ConsoleSessionOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 12 * 60 * 60 * 1000;
    this.#max = options.maxSessions ?? 1000;
    this.#now = options.now ?? Date.now;
  }

  /** Starts a session for `caller`; returns the id for the cookie and the session. */
  create(caller: string): { id: string; session: ConsoleSession } {
    this.#sweep();
    while (this.#byDigest.size >= this.#max) {
      const oldest = this.#byDigest.keys().next().value;
      if (oldest === undefined) break;
      this.#byDigest.delete(oldest);
    }
    const id = randomBytes(32).toString('base64url');
    const session: ConsoleSession = { caller, csrf: randomBytes(32).toString('base64url'), expiresAt: this.#now() + this.#ttlMs };
    this.#byDigest.set(digest(id), session);
    return { id, session };
  }

  /** The live session of a cookie value, or undefined. */
  get(id: string | undefined): ConsoleSession | undefined {
    if (id === undefined || !SESSION_ID.test(id)) return undefined;
    const key = digest(id);
    const session = this.#byDigest.get(key);
    if (!session) return undefined;
    if (session.expiresAt <= this.#now()) {
      this.#byDigest.delete(key);
      return undefined;
    }
    return session;
  }

  /** Whether `presented` is the session's CSRF token. */
  csrfMatches(session: ConsoleSession, presented: string | undefined): boolean {
    return presented !== undefined && presented.length <= 100 && sameText(session.csrf, presented);
  }

  /** Ends a session (sign-out); unknown ids are ignored. */
  delete(id: string | undefined): void {
    if (id !== undefined && SESSION_ID.test(id)) this.#byDigest.delete(digest(id));
  }

  /** How long a session lasts after sign-in. */
  get ttlMs(): number {
    return this.#ttlMs;
  }

  get size(): number {
    return this.#byDigest.size;
  }

  #sweep(): void {
    const now = this.#now();
    for (const [key, session] of this.#byDigest) if (session.expiresAt <= now) this.#byDigest.delete(key);
  }
}
