/**
 * The span side of the one redaction (src/secrets): every span a role exports passes through here on
 * its way to the OTLP exporter, so a secret quoted in an exception event, a status message or an
 * attribute never leaves the process, whichever code recorded it (ours, bullmq-otel's job spans, a
 * client library's). Spans are read-only once ended: the exporter gets a view whose name,
 * attributes, status and events are redacted; everything else is the span's own.
 */
import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter, TimedEvent } from '@opentelemetry/sdk-trace-node';
import type { Redactor } from '../secrets/secret-registry.ts';

function redactedValue(value: AttributeValue | undefined, redactor: Redactor): AttributeValue | undefined {
  if (typeof value === 'string') return redactor.redact(value);
  if (Array.isArray(value)) return value.map((v: unknown) => (typeof v === 'string' ? redactor.redact(v) : v)) as AttributeValue;
  return value;
}

function redactedAttributes(attributes: Attributes, redactor: Redactor): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attributes)) out[k] = redactedValue(v, redactor);
  return out;
}

function redactedEvent(event: TimedEvent, redactor: Redactor): TimedEvent {
  return { ...event, name: redactor.redact(event.name), ...(event.attributes ? { attributes: redactedAttributes(event.attributes, redactor) } : {}) };
}

/** A view of `span` with its texts redacted. */
export function redactedSpan(span: ReadableSpan, redactor: Redactor): ReadableSpan {
  const overrides = {
    name: redactor.redact(span.name),
    attributes: redactedAttributes(span.attributes, redactor),
    status: span.status.message === undefined ? span.status : { ...span.status, message: redactor.redact(span.status.message) },
    events: span.events.map((e) => redactedEvent(e, redactor)),
  };
  return new Proxy(span, {
    get(target, prop) {
      if (Object.prototype.hasOwnProperty.call(overrides, prop)) return overrides[prop as keyof typeof overrides];
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** `exporter`, with every span redacted first. */
export function redactingExporter(exporter: SpanExporter, redactor: Redactor): SpanExporter {
  return {
    export: (spans, done) =>
      exporter.export(
        spans.map((s) => redactedSpan(s, redactor)),
        done,
      ),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}
