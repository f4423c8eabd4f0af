/**
 * Spans for the project's own code, through the OpenTelemetry API only. Without tracing (no OTLP
 * endpoint) the API's global tracer is its no-op one: a span costs a few property reads and no
 * SDK is loaded (src/telemetry/tracing.ts).
 */
import {
  context,
  createContextKey,
  INVALID_SPAN_CONTEXT,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type SpanOptions,
} from '@opentelemetry/api';

export const TRACER_NAME = 'egress-proxies';

/**
 * Whether this process exports spans (the SDK installed by src/telemetry/sdk.ts). Without it the
 * API's tracer is a no-op, and the project's own spans skip even that: no span object, no context,
 * no attribute objects on the checks' hot path.
 */
let exporting = false;

/** Said by the SDK when it installs its tracer provider (true) and when it shuts down (false). */
export function setSpansExported(on: boolean): void {
  exporting = on;
}

/** What `fn` gets while spans are not exported: records nothing, as the API's no-op span. */
const NOT_RECORDED: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** The role (scheduler, worker, publisher, api) whose service a span belongs to, carried in the context. */
export const ROLE_KEY = createContextKey('egress.role');

export function tracer(): ReturnType<typeof trace.getTracer> {
  return trace.getTracer(TRACER_NAME);
}

/** Runs `fn` with `role` in the active context: spans started inside report as that role's service. */
export function inRole<T>(role: string, fn: () => T): T {
  return context.with(context.active().setValue(ROLE_KEY, role), fn);
}

/** The error's stable code (EgressError, Node's system errors, ssh2 levels), if it has one. */
export function errorCode(err: unknown): string | undefined {
  if (err && typeof err === 'object' && 'code' in err) {
    const code = err.code;
    if (typeof code === 'string' || typeof code === 'number') return String(code);
  }
  return undefined;
}

/** Records `err` on `span` with its code (`error.type` and `egress.error.code`) and marks the span failed. */
export function recordError(span: Span, err: unknown): void {
  const error = err instanceof Error ? err : new Error(String(err));
  const code = errorCode(err);
  // The event names the error's class and message (the SDK would put a `code` in place of the class); the code goes on the span.
  span.recordException({ name: error.name, message: error.message });
  span.setAttribute('error.type', code ?? error.name);
  if (code !== undefined) span.setAttribute('egress.error.code', code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}

/**
 * Runs `fn` in a new span that is the active one meanwhile: ended when `fn` settles, failed
 * (with the error's code) when it throws. `fn` may add attributes through the span.
 */
export async function withSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>, options: SpanOptions = {}): Promise<T> {
  if (!exporting) return fn(NOT_RECORDED);
  const span = tracer().startSpan(name, { ...options, attributes: { ...options.attributes, ...attributes } });
  try {
    return await context.with(trace.setSpan(context.active(), span), () => fn(span));
  } catch (err) {
    recordError(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** A span that already happened (start and duration known afterwards), under the active context or `parent`. */
export function recordSpan(name: string, attributes: Attributes, startMs: number, endMs: number, parent: Context = context.active()): Span {
  if (!exporting) return NOT_RECORDED;
  const span = tracer().startSpan(name, { startTime: startMs, attributes }, parent);
  span.end(endMs);
  return span;
}
