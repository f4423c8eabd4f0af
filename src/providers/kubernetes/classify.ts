import { ApiException, FetchError } from '@kubernetes/client-node';

import type { Classified } from '../../health/classified.ts';
import { statusMessage } from '../../clients/kubernetes/status.ts';

export { MAX_MESSAGE, truncateMessage, type Classified } from '../../health/classified.ts';

/**
 * Maps a client-node failure to a health reason, by HTTP status or by transport error type, never by
 * message text: 401 → Unauthorized, 403 → Forbidden, other HTTP statuses → Error (with the Status
 * message), a transport failure (refused, reset, DNS, TLS, premature close) → Unreachable.
 * The caller reports Timeout instead once its signal has ended.
 */
export function classifyKubeError(err: unknown): Classified {
  if (err instanceof ApiException) {
    const code = Number(err.code);
    const detail = statusMessage(err.body);
    if (code === 401) return { reason: 'Unauthorized', message: `the API server rejected the credentials (HTTP 401)${detail ? `: ${detail}` : ''}` };
    if (code === 403) return { reason: 'Forbidden', message: detail ?? 'forbidden (HTTP 403)' };
    return { reason: 'Error', message: `HTTP ${code}: ${detail ?? 'no Status message'}` };
  }
  if (err instanceof FetchError) {
    const code = typeof err.code === 'string' ? err.code : undefined;
    if (err.type === 'system') return { reason: 'Unreachable', message: code ? `${code}: ${err.message}` : err.message };
    return { reason: 'Error', message: err.message };
  }
  return { reason: 'Error', message: err instanceof Error ? err.message : String(err) };
}
