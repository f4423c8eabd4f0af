/**
 * The bound every paged listing of a peer keeps (a Kubernetes `continue`, a Compute `nextPageToken`):
 * a token the peer already sent, or more pages than `maxPages`, ends the listing with a
 * ListingPagesError instead of following the peer for ever (a broken or hostile server that repeats
 * its token made a GC sweep grow to gigabytes in a minute). The tokens seen are kept for the listing's
 * length, so they are bounded by `maxPages` too.
 */
import { EgressError } from '../errors.ts';

/** Pages one listing may take: 10 000 pages of 500 are five million objects. */
export const DEFAULT_MAX_PAGES = 10_000;

/** A peer's paging went wrong: a repeated continue token, or more pages than the bound. Retryable: the next sweep lists again. */
export class ListingPagesError extends EgressError {
  readonly pages: number;
  constructor(what: string, message: string, pages: number) {
    super('ERR_LISTING_PAGES', `${what}: ${message} (after ${pages} page${pages === 1 ? '' : 's'}); the listing was stopped`, { retryable: true });
    this.pages = pages;
  }
}

/**
 * Follows one listing's page tokens: `next(token)` after each page with the token that page gave
 * (undefined or '' when it was the last); returns the token to ask for, or undefined when done.
 * Throws ListingPagesError on a token seen before in this listing or on page `maxPages + 1`.
 */
export class PageBound {
  readonly #what: string;
  readonly #maxPages: number;
  readonly #seen = new Set<string>();
  #pages = 0;

  constructor(what: string, maxPages = DEFAULT_MAX_PAGES) {
    this.#what = what;
    this.#maxPages = maxPages;
  }

  next(token: string | null | undefined): string | undefined {
    this.#pages++;
    if (!token) return undefined;
    if (this.#seen.has(token)) {
      throw new ListingPagesError(this.#what, `the server sent the same page token twice (${JSON.stringify(token.slice(0, 64))})`, this.#pages);
    }
    if (this.#pages >= this.#maxPages) throw new ListingPagesError(this.#what, `more than ${this.#maxPages} pages`, this.#pages);
    this.#seen.add(token);
    return token;
  }
}
