/**
 * The span side of the one redaction (src/secrets): every span a role exports passes through here on
 * its way to the OTLP exporter, so a secret quoted in an exception event, a status message or an
 * attribute never leaves the process, whichever code recorded it (ours, bullmq-otel's job spans, a
 * client library's). Spans are read-only once ended: a span whose name, attributes, status and
 * events hold nothing to redact goes to the exporter as it is; any other goes as a plain copy with
 * those texts redacted and everything else the span's own.
 *
 * Cost: this runs on every exported span (several per check). The texts of a batch repeat (queue
 * names, worker ids, providers, targets), so each distinct text is redacted once per export call;
 * the memo lives only for that synchronous call, so a secret told to the registry since the last
 * export is always applied.
 */
import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter, TimedEvent } from '@opentelemetry/sdk-trace-node';
import type { Redactor } from '../secrets/secret-registry.ts';

/** `redactor` with each distinct text redacted once (for one export call: the registry cannot change meanwhile). */
function memoized(redactor: Redactor): Redactor {
  const seen = new Map<string, string>();
  return {
    redact(text) {
      let out = seen.get(text);
      if (out === undefined) {
        out = redactor.redact(text);
        seen.set(text, out);
      }
      return out;
    },
  };
}

/** The redacted value, or the same value when nothing in it changed. */
function redactedValue(value: AttributeValue | undefined, redactor: Redactor): AttributeValue | undefined {
  if (typeof value === 'string') return redactor.redact(value);
  if (!Array.isArray(value)) return value;
  let out: unknown[] | undefined;
  for (let i = 0; i < value.length; i++) {
    const v: unknown = value[i];
    if (typeof v !== 'string') continue;
    const clean = redactor.redact(v);
    if (clean === v) continue;
    out ??= [...(value as unknown[])];
    out[i] = clean;
  }
  return (out ?? value) as AttributeValue;
}

/** The redacted attributes, or the same object when nothing in them changed. */
function redactedAttributes(attributes: Attributes, redactor: Redactor): Attributes {
  let out: Attributes | undefined;
  for (const k in attributes) {
    const v = attributes[k];
    const clean = redactedValue(v, redactor);
    if (clean === v) continue;
    out ??= { ...attributes };
    out[k] = clean;
  }
  return out ?? attributes;
}

function redactedEvent(event: TimedEvent, redactor: Redactor): TimedEvent {
  const name = redactor.redact(event.name);
  const attributes = event.attributes ? redactedAttributes(event.attributes, redactor) : undefined;
  if (name === event.name && attributes === event.attributes) return event;
  return { ...event, name, ...(attributes ? { attributes } : {}) };
}

function redactedEvents(events: TimedEvent[], redactor: Redactor): TimedEvent[] {
  let out: TimedEvent[] | undefined;
  for (let i = 0; i < events.length; i++) {
    const e = events[i] as TimedEvent;
    const clean = redactedEvent(e, redactor);
    if (clean === e) continue;
    out ??= [...events];
    out[i] = clean;
  }
  return out ?? events;
}

/** `span` with its texts redacted: the span itself when nothing in it changed, otherwise a plain copy. */
export function redactedSpan(span: ReadableSpan, redactor: Redactor): ReadableSpan {
  const name = redactor.redact(span.name);
  const attributes = redactedAttributes(span.attributes, redactor);
  const message = span.status.message;
  const cleanMessage = message === undefined ? undefined : redactor.redact(message);
  const events = redactedEvents(span.events, redactor);
  if (name === span.name && attributes === span.attributes && cleanMessage === message && events === span.events) return span;
  const spanContext = span.spanContext();
  return {
    name,
    kind: span.kind,
    spanContext: () => spanContext,
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    status: cleanMessage === message ? span.status : { ...span.status, message: cleanMessage },
    attributes,
    links: span.links,
    events,
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

/** `exporter`, with every span redacted first. */
export function redactingExporter(exporter: SpanExporter, redactor: Redactor): SpanExporter {
  return {
    export(spans, done) {
      const memo = memoized(redactor);
      exporter.export(
        spans.map((s) => redactedSpan(s, memo)),
        done,
      );
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}
