/**
 * The one redaction: every secret this process holds is told to one registry, and every text that
 * leaves the process as a record (status `lastError` and conditions, ProviderHealth messages, events,
 * log lines, spans, failed jobs) passes its `redact`. Peers quote what they were sent — a Compute 400
 * quotes the insert body (the proxy's password in the user-data, the bearer token), libvirt quotes the
 * XML, a kube-apiserver the Pod and its Secret — so no error text is trusted to be clean.
 *
 * What is replaced with `[redacted]`: each secret as it is and in the encodings it travels in —
 * percent-encoding (URLs, form bodies), JSON string escaping, XML escaping (libvirt's domain XML) —
 * and every run of base64 (or base64url) characters whose decoded bytes hold a secret in any of those
 * forms: Basic auth (`user:password`, `Proxy-Authorization: Basic …`), a Kubernetes Secret's `data`, a
 * base64 user-data that carries the password.
 *
 * Credentials are also found by their shape (`Bearer …`, `Basic …`, JSON `access_token`): tokens the
 * registry was never told (minted inside a client library, rotated since) do not leave either.
 *
 * Short values: a secret shorter than MIN_SECRET_LENGTH (4) characters is not registered — it would
 * turn every message into mush and hides nothing a reader could not guess. Generated proxy passwords
 * are 32 characters, tokens longer still.
 *
 * Cost: one pass over the text, whatever the number of secrets (thousands of proxies): forms are
 * indexed by their first three characters, so each position costs one map lookup (generated secrets
 * are random, so a bucket holds one or two forms); then one pass over its base64 runs, each decoded
 * once and looked up the same way. Nothing is keyed on what secrets share (a proxy's user name
 * `egress-<name>`, the base64 of it), which would make every bucket hold every proxy. A text that ends
 * inside a secret (a message truncated by a peer or by MAX_MESSAGE before it got here) has that tail
 * redacted too when at least MIN_SECRET_LENGTH characters of the secret remain.
 */

export const REDACTED = '[redacted]';

/** Shorter secrets are not redacted (see above). */
export const MIN_SECRET_LENGTH = 4;

/** What holders of secrets tell the registry. `owner` names a set that is replaced as a whole (a rotated token, a proxy's credentials). */
export interface SecretSink {
  /** Sets the secrets of `owner` (replacing what it had); empty or undefined values are ignored. */
  set(owner: string, values: readonly (string | undefined)[]): void;
  /** A user and password pair: the password, and `user:password` in its Basic-auth forms. */
  setCredentials(owner: string, credentials: { username: string; password: string }): void;
  /** Forgets the secrets of `owner` (a deleted proxy). */
  forget(owner: string): void;
}

/** What sinks call. */
export interface Redactor {
  redact(text: string): string;
}

/** The registry as its holders see it: told secrets, and redacting with them. */
export type Secrets = SecretSink & Redactor;

/** The owner of a proxy's credentials in the registry (reconcile sets them as it reads them, forgets them with the proxy). */
export function proxySecretOwner(proxy: string): string {
  return `proxy:${proxy}`;
}

/** A redactor that changes nothing, for library callers and tests that hold no secret. */
export const NO_REDACTION: Redactor & SecretSink = Object.freeze({
  redact: (text: string) => text,
  set: () => undefined,
  setCredentials: () => undefined,
  forget: () => undefined,
});

function xmlEscaped(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** Every textual form `value` travels in (base64 is found by decoding, see `redact`). */
export function encodingsOf(value: string): string[] {
  return [value, encodeURIComponent(value), JSON.stringify(value).slice(1, -1), xmlEscaped(value)];
}

/** Runs of the base64 and base64url alphabets long enough to hold a secret of MIN_SECRET_LENGTH bytes. */
const BASE64_RUN = /[A-Za-z0-9+/_-]{8,}={0,2}/g;

/**
 * Credentials by their shape, whatever their value: what follows `Bearer` or `Basic` (an Authorization
 * header a peer quotes back), and the values of `access_token`, `refresh_token` and `id_token` in JSON.
 * These catch tokens the registry was never told — minted inside a client library (GCE tokens from a
 * service-account key or the default credentials, self-signed JWTs, Kubernetes exec plugins) or read
 * from a file since rotated.
 */
const AUTH_SCHEME_VALUE = /\b(Bearer|Basic)(\s+)([A-Za-z0-9._~+/-]{8,}=*)/gi;
const JSON_TOKEN_VALUE = /("(?:access|refresh|id)_token"\s*:\s*")[^"\\]{8,}(")/g;
/** A word of prose after the scheme ("Bearer required") is all letters and short; a token is not. */
const looksLikeToken = (value: string): boolean => /[0-9._~+/=-]/.test(value) || value.length >= 20;

export function redactCredentialShapes(text: string): string {
  return text
    .replace(AUTH_SCHEME_VALUE, (whole, scheme: string, space: string, value: string) => (looksLikeToken(value) ? `${scheme}${space}${REDACTED}` : whole))
    .replace(JSON_TOKEN_VALUE, `$1${REDACTED}$2`);
}

/** The three-character key of position `i` of `text` (UTF-16 units, so it always fits a double exactly). */
function keyAt(text: string, i: number): number {
  return text.charCodeAt(i) * 0x1_0000_0000 + text.charCodeAt(i + 1) * 0x1_0000 + text.charCodeAt(i + 2);
}

export class SecretRegistry implements SecretSink, Redactor {
  readonly #owners = new Map<string, string[]>();
  /** Key of a form's first three characters → the forms, longest first. Rebuilt lazily after a change. */
  #index: Map<number, string[]> | undefined;

  set(owner: string, values: readonly (string | undefined)[]): void {
    const forms = new Set<string>();
    for (const v of values) {
      if (v === undefined || v.length < MIN_SECRET_LENGTH) continue;
      for (const f of encodingsOf(v)) if (f.length >= MIN_SECRET_LENGTH) forms.add(f);
    }
    const previous = this.#owners.get(owner);
    if (forms.size === 0) {
      if (previous) this.forget(owner);
      return;
    }
    const list = [...forms];
    if (previous && previous.length === list.length && previous.every((f, i) => f === list[i])) return;
    this.#owners.set(owner, list);
    this.#index = undefined;
  }

  setCredentials(owner: string, credentials: { username: string; password: string }): void {
    // The password alone: `user:password` shows as `user:[redacted]`, and its base64 (Basic auth) is
    // found by decoding. The user name is no secret.
    this.set(owner, [credentials.password]);
  }

  forget(owner: string): void {
    if (this.#owners.delete(owner)) this.#index = undefined;
  }

  /** How many distinct forms are known (for tests and metrics). */
  get size(): number {
    let n = 0;
    for (const list of this.#indexed().values()) n += list.length;
    return n;
  }

  #indexed(): Map<number, string[]> {
    if (this.#index) return this.#index;
    const buckets = new Map<number, Set<string>>();
    for (const forms of this.#owners.values()) {
      for (const f of forms) {
        const k = keyAt(f, 0);
        const list = buckets.get(k);
        if (!list) buckets.set(k, new Set([f]));
        else list.add(f);
      }
    }
    const index = new Map<number, string[]>();
    for (const [k, list] of buckets)
      index.set(
        k,
        [...list].sort((a, b) => b.length - a.length),
      );
    this.#index = index;
    return index;
  }

  redact(text: string): string {
    if (text.length < MIN_SECRET_LENGTH) return text;
    const index = this.#indexed();
    const known = index.size === 0 ? text : this.#redactForms(text, index).replace(BASE64_RUN, (run) => (this.#holdsSecret(run, index) ? REDACTED : run));
    return redactCredentialShapes(known);
  }

  /** Whether `run`, decoded as base64 (either alphabet), holds a secret. */
  #holdsSecret(run: string, index: Map<number, string[]>): boolean {
    const decoded = Buffer.from(run, 'base64').toString('latin1');
    if (decoded.length < MIN_SECRET_LENGTH) return false;
    // Decoded as latin1 (one char per byte) and as UTF-8: a secret with non-ASCII characters is in its UTF-8 bytes.
    if (this.#redactForms(decoded, index, false) !== decoded) return true;
    const utf8 = Buffer.from(run, 'base64').toString('utf8');
    return this.#redactForms(utf8, index, false) !== utf8;
  }

  #redactForms(text: string, index: Map<number, string[]>, tails = true): string {
    let out: string | undefined;
    let copied = 0;
    const end = text.length;
    for (let i = 0; i + 3 <= end; i++) {
      const forms = index.get(keyAt(text, i));
      if (!forms) continue;
      let len = 0;
      for (const f of forms) {
        if (text.startsWith(f, i)) {
          len = f.length;
          break;
        }
      }
      // A text cut inside a secret: its tail is the secret's beginning.
      if (len === 0 && tails && end - i >= MIN_SECRET_LENGTH) {
        const tail = text.endsWith('…') ? text.slice(i, -1) : text.slice(i);
        if (tail.length >= MIN_SECRET_LENGTH && forms.some((f) => f.length > tail.length && f.startsWith(tail))) len = tail.length;
      }
      if (len === 0) continue;
      out = (out ?? '') + text.slice(copied, i) + REDACTED;
      copied = i + len;
      i = copied - 1;
    }
    return out === undefined ? text : out + text.slice(copied);
  }
}
