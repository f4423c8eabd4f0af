/**
 * A vendor's list endpoint (`endpointsUrl`): the same text as an endpoints file, fetched again
 * once it is older than `refreshMs` (at the next read: no timer runs), with a bearer token from a
 * file when the vendor wants one. A fetch that fails keeps the last list that was read (logged):
 * a vendor's API down for a while neither removes its endpoints nor stops the fronts. A list never
 * read yet fails the read (UpstreamEndpointsError), and nothing is created or deleted from it.
 */
import { readFile } from 'node:fs/promises';
import type { Logger } from '../../logging.ts';
import type { SecretSink } from '../../secrets/secret-registry.ts';
import { UpstreamEndpointsError } from './endpoints-error.ts';

/** A list larger than this is no vendor's proxy list. */
const MAX_LIST_BYTES = 4 * 1024 * 1024;
const FETCH_TIMEOUT_MS = 15_000;

export interface ListUrlOptions {
  url: string;
  refreshMs: number;
  tokenFile?: string;
  /** The owner name the token is registered under in the secret registry. */
  owner: string;
  secrets?: SecretSink;
  logger: Logger;
  /** The time, for tests. */
  now?: () => number;
}

export class ListUrl {
  readonly #o: ListUrlOptions;
  #text: string | undefined;
  #fetchedAt = -Infinity;
  #fetching: Promise<string> | undefined;

  constructor(options: ListUrlOptions) {
    this.#o = options;
  }

  /** What the URL is shown as: scheme, host and path, never its query (it may carry a key). */
  get shown(): string {
    const u = new URL(this.#o.url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  }

  async #fetch(): Promise<string> {
    const headers: Record<string, string> = { accept: 'text/plain' };
    if (this.#o.tokenFile !== undefined) {
      const token = (await readFile(this.#o.tokenFile, 'utf8')).trim();
      this.#o.secrets?.set(this.#o.owner, [token]);
      headers.authorization = `Bearer ${token}`;
    }
    const res = await fetch(this.#o.url, { headers, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'error' });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const text = await res.text();
    if (text.length > MAX_LIST_BYTES) throw new Error(`the list exceeds ${MAX_LIST_BYTES} bytes`);
    return text;
  }

  /** The list's text: fetched again when stale, the last one read when that fails. */
  async text(): Promise<string> {
    const now = (this.#o.now ?? Date.now)();
    if (this.#text !== undefined && now - this.#fetchedAt < this.#o.refreshMs) return this.#text;
    this.#fetching ??= this.#fetch()
      .then(
        (text) => {
          if (this.#text !== undefined && text !== this.#text) this.#o.logger.info({ list: this.shown }, 'vendor endpoint list changed');
          this.#text = text;
          this.#fetchedAt = (this.#o.now ?? Date.now)();
          return text;
        },
        (err: unknown) => {
          const why = `cannot fetch the endpoint list ${this.shown}: ${(err as Error).message}`;
          if (this.#text === undefined) throw new UpstreamEndpointsError(why, { cause: err });
          this.#o.logger.warn({ list: this.shown, err: (err as Error).message }, 'keeping the last endpoint list');
          return this.#text;
        },
      )
      .finally(() => (this.#fetching = undefined));
    return this.#fetching;
  }
}
