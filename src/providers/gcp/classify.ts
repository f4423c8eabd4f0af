import type { Classified } from '../../health/classified.ts';

export { MAX_MESSAGE, truncateMessage, type Classified } from '../../health/classified.ts';

/** The HTTP status of a GaxiosError (`status`, or a numeric `code`), if the server answered. */
export function httpStatus(err: unknown): number | undefined {
  if (!(err instanceof Error)) return undefined;
  const e = err as { status?: unknown; code?: unknown; response?: { status?: unknown } };
  for (const v of [e.status, e.response?.status, e.code]) {
    if (typeof v === 'number' && v >= 100 && v <= 599) return v;
  }
  return undefined;
}

/**
 * True for a gaxios request error, whichever copy of gaxios threw it (gaxios tags its errors with this
 * registered symbol for exactly that purpose).
 */
export function isGaxiosError(err: unknown): err is Error {
  return err instanceof Error && Symbol.for('gaxios-gaxios-error') in err;
}

/**
 * The transport error code (ECONNREFUSED, ENOTFOUND, ECONNRESET, CERT_HAS_EXPIRED, …) of a gaxios request
 * that got no HTTP answer. Other errors (a token file that cannot be read) have none.
 */
export function transportCode(err: unknown): string | undefined {
  if (!isGaxiosError(err) || httpStatus(err) !== undefined) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && code !== '') return code;
  const causeCode = (err.cause as { code?: unknown } | undefined)?.code;
  return typeof causeCode === 'string' && causeCode !== '' ? causeCode : undefined;
}

/**
 * The Apiary error of a GaxiosError: `message` is the raw JSON body
 * (`{"error": {"code", "message", "errors": [{"reason"}]}}`). Used for the text and the reason string only,
 * never to decide the health reason.
 */
export function apiaryError(err: unknown): { message?: string; reason?: string } {
  if (!(err instanceof Error)) return {};
  const candidates: unknown[] = [(err as { response?: { data?: unknown } }).response?.data, err.message];
  for (const c of candidates) {
    let body: unknown = c;
    if (typeof c === 'string') {
      try {
        body = JSON.parse(c);
      } catch {
        continue;
      }
    }
    const e = (body as { error?: { message?: unknown; errors?: { reason?: unknown }[] } } | undefined)?.error;
    if (e && typeof e === 'object') {
      const reason = e.errors?.[0]?.reason;
      return {
        ...(typeof e.message === 'string' ? { message: e.message } : {}),
        ...(typeof reason === 'string' ? { reason } : {}),
      };
    }
  }
  return {};
}

/**
 * Maps a Compute client failure to a health reason by HTTP status, never by message text:
 * 401 → Unauthorized; 403 → Forbidden (missing permission, or the Compute API disabled); any other
 * status → Error; no HTTP answer but a transport code (refused, DNS, reset, TLS) → Unreachable.
 * The caller reports Timeout instead once its signal has ended.
 */
export function classifyComputeError(err: unknown): Classified {
  const status = httpStatus(err);
  if (status !== undefined) {
    const { message, reason } = apiaryError(err);
    const text = `HTTP ${status}${reason ? ` ${reason}` : ''}: ${message ?? 'no error message'}`;
    if (status === 401) return { reason: 'Unauthorized', message: text };
    if (status === 403) return { reason: 'Forbidden', message: text };
    return { reason: 'Error', message: text };
  }
  const code = transportCode(err);
  const text = err instanceof Error ? err.message : String(err);
  if (code !== undefined) return { reason: 'Unreachable', message: `${code}: ${text}` };
  return { reason: 'Error', message: text };
}
