/**
 * An error as it may leave the process: its message, stack and own string fields (a LibvirtError's
 * `libvirtMessage`, a client's `body`) and those of its causes passed through the one redaction. The
 * error is changed in place, so its class, code and retry data (`retryable`, `retryAfterMs`) — what
 * the job boundary and `findCause` read — stay as they were.
 */
import type { Redactor } from './secret-registry.ts';

/** Causes followed at most (a cycle or a very long chain stops here). */
const MAX_DEPTH = 8;

/** A string, or a plain object of strings one level down (a LibvirtError's `remote`), redacted; the same value when nothing changed. */
function redactedValue(value: unknown, redactor: Redactor): unknown {
  if (typeof value === 'string') return redactor.redact(value);
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return value;
  let changed = false;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const clean = typeof v === 'string' ? redactor.redact(v) : v;
    if (clean !== v) changed = true;
    out[k] = clean;
  }
  return changed ? out : value;
}

function redactFields(err: Error, redactor: Redactor): void {
  for (const key of Object.getOwnPropertyNames(err)) {
    if (key === 'cause') continue;
    const value: unknown = (err as unknown as Record<string, unknown>)[key];
    const clean = redactedValue(value, redactor);
    if (clean === value) continue;
    try {
      (err as unknown as Record<string, unknown>)[key] = clean;
    } catch {
      // A frozen or read-only field: left as it is (message and stack are always writable on our errors).
    }
  }
}

/** `err` with every string it carries redacted (non-errors become an Error of their redacted text). */
export function redactError(err: unknown, redactor: Redactor): unknown {
  if (!(err instanceof Error)) return typeof err === 'string' ? new Error(redactor.redact(err)) : err;
  let current: unknown = err;
  const seen = new Set<unknown>();
  for (let depth = 0; current instanceof Error && depth < MAX_DEPTH && !seen.has(current); depth++) {
    seen.add(current);
    redactFields(current, redactor);
    current = current.cause;
  }
  return err;
}

/** The redacted text of anything thrown. */
export function redactedText(err: unknown, redactor: Redactor): string {
  return redactor.redact(err instanceof Error ? err.message : String(err));
}
