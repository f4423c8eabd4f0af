import type { Provider } from '../providers/types.ts';
import type { TargetResult } from '../health/types.ts';

/**
 * How long a checker gets after its signal ends to return what it has (its targets that had
 * already answered stay Ready). A checker still running after that is abandoned.
 */
export const ABANDON_GRACE_MS = 250;

function timeoutResult(target: string, startedAt: number, message: string): TargetResult {
  return {
    target,
    ready: false,
    reason: 'Timeout',
    message,
    details: {},
    durationSeconds: (performance.now() - startedAt) / 1000,
  };
}

/**
 * Runs a provider's check under `signal` and always returns one result per target:
 * - a checker that has not returned ABANDON_GRACE_MS after the signal ended is abandoned, and
 *   its targets report `Timeout`;
 * - once the signal has ended, every target that is not ready reports `Timeout`, whatever the
 *   underlying error said (the deadline is the cause; the error only repeats it);
 * - a checker that throws reports `Error` on every target (a bug, not a verdict on the backend).
 */
export async function runCheck(provider: Provider, signal: AbortSignal): Promise<TargetResult[]> {
  const startedAt = performance.now();
  const targets = provider.targets();
  const deadlineMessage = (): string => {
    const reason: unknown = signal.reason;
    const why = reason instanceof Error ? reason.message : 'the check was aborted';
    return `no answer before the check deadline (${why})`;
  };
  if (signal.aborted) return targets.map((t) => timeoutResult(t, startedAt, deadlineMessage()));

  let onAbort: (() => void) | undefined;
  let graceTimer: NodeJS.Timeout | undefined;
  const abandoned = new Promise<'abandoned'>((resolve) => {
    onAbort = () => {
      graceTimer = setTimeout(() => resolve('abandoned'), ABANDON_GRACE_MS);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  const checking = provider.check(signal);
  // The abandoned checker may still settle later; nothing is waiting for it then.
  checking.catch(() => undefined);
  let results: TargetResult[] | 'abandoned';
  try {
    results = await Promise.race([checking, abandoned]);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    results = targets.map((target) => ({
      target,
      ready: false,
      reason: 'Error' as const,
      message: `the check failed: ${message}`,
      details: {},
      durationSeconds: (performance.now() - startedAt) / 1000,
    }));
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
    clearTimeout(graceTimer);
  }
  if (results === 'abandoned') return targets.map((t) => timeoutResult(t, startedAt, deadlineMessage()));
  if (!signal.aborted) return results;
  return results.map((r) => (r.ready ? r : { ...r, reason: 'Timeout' as const, message: r.message || deadlineMessage() }));
}
