import { ApiException } from '@kubernetes/client-node';

/** The `message` of a Kubernetes Status body, which client-node hands over as a string. */
export function statusMessage(body: unknown): string | undefined {
  if (typeof body !== 'string' || body === '') return undefined;
  try {
    const parsed = JSON.parse(body) as { message?: unknown };
    return typeof parsed.message === 'string' && parsed.message !== '' ? parsed.message : undefined;
  } catch {
    return body;
  }
}

/** The Status `reason` (NotFound, AlreadyExists, Conflict, Expired, …) of an ApiException, if any. */
export function statusReason(err: unknown): string | undefined {
  if (!(err instanceof ApiException) || typeof err.body !== 'string') return undefined;
  try {
    const reason = (JSON.parse(err.body) as { reason?: unknown }).reason;
    return typeof reason === 'string' ? reason : undefined;
  } catch {
    return undefined;
  }
}
