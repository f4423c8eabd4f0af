/**
 * The OpenTelemetry SDK side of tracing, loaded (dynamic import, src/telemetry/tracing.ts) only
 * when an OTLP endpoint is configured. One tracer provider per role, each with its own service
 * name and exporter; the global tracer routes a span to its role's provider by the role in the
 * active context (src/telemetry/spans.ts `inRole`), so `egress up` reports four services.
 */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  trace,
  type Attributes,
  type Context,
  type Exception,
  type Span,
  type SpanOptions,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  NodeTracerProvider,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
} from '@opentelemetry/sdk-trace-node';
import type { Telemetry } from 'bullmq';
import { BullMQOtel } from 'bullmq-otel';
import { packageVersion } from '../version.ts';
import type { TelemetryConfig } from './config.ts';
import { ROLE_KEY, setSpansExported } from './spans.ts';
import type { TracingRuntime } from './tracing.ts';
import type { Redactor } from '../secrets/secret-registry.ts';
import { redactingExporter } from './redacting-exporter.ts';

function samplerOf(config: TelemetryConfig['sampler']): Sampler {
  switch (config.name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(config.ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.ratio) });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** Picks, for every span, the tracer of the role in its parent context (or the default role's). */
class RoutingTracer {
  readonly #pick: (ctx: Context) => Tracer;
  constructor(pick: (ctx: Context) => Tracer) {
    this.#pick = pick;
  }
  startSpan(name: string, options?: SpanOptions, ctx: Context = context.active()): Span {
    return this.#pick(ctx).startSpan(name, options, ctx);
  }
  startActiveSpan(name: string, ...rest: unknown[]): unknown {
    const fn = rest[rest.length - 1] as (span: Span) => unknown;
    const options = rest.length >= 2 ? (rest[0] as SpanOptions | undefined) : undefined;
    const ctx = rest.length >= 3 ? (rest[1] as Context) : context.active();
    const span = this.startSpan(name, options, ctx);
    return context.with(trace.setSpan(ctx, span), fn, undefined, span);
  }
}

/** What BullMQ puts on a completed job's `process` span event: the job's whole return value, as JSON. */
const JOB_RESULT = 'bullmq.job.result';

/**
 * BullMQ's span, as bullmq-otel's adapter makes it, except that the `job completed` event does not
 * carry the job's return value (`bullmq.job.result`): that copy of every job's result (for a check,
 * its whole CheckResult) was a third of tracing's cost per check — redacted, then serialised into
 * every export — and says nothing the trace lacks: a check's targets are its `check target` spans,
 * and the value stays on the job in Redis.
 */
class JobSpan {
  readonly #span: Span;
  constructor(span: Span) {
    this.#span = span;
  }
  setSpanOnContext(ctx: Context): Context {
    return trace.setSpan(ctx, this.#span);
  }
  setAttribute(key: string, value: Attributes[string] & {}): void {
    this.#span.setAttribute(key, value);
  }
  setAttributes(attributes: Attributes): void {
    this.#span.setAttributes(attributes);
  }
  addEvent(name: string, attributes?: Attributes): void {
    if (attributes && JOB_RESULT in attributes) {
      const { [JOB_RESULT]: _result, ...rest } = attributes;
      this.#span.addEvent(name, rest);
    } else {
      this.#span.addEvent(name, attributes);
    }
  }
  recordException(exception: Exception, time?: number): void {
    this.#span.recordException(exception, time);
  }
  end(): void {
    this.#span.end();
  }
}

/** BullMQ's telemetry (bullmq-otel's context manager) for one role: its spans on the role's provider, its contexts marked with the role. */
function bullmqTelemetry(role: string, provider: NodeTracerProvider): Telemetry {
  const otel = new BullMQOtel({ tracerName: 'bullmq' });
  const tracer = provider.getTracer('bullmq');
  const manager = otel.contextManager;
  // A context already marked with this role (the usual case inside a job) is used as it is: marking it again copies it.
  const marked = (ctx: Context): Context => (ctx.getValue(ROLE_KEY) === role ? ctx : ctx.setValue(ROLE_KEY, role));
  return {
    tracer: { startSpan: (name, options, ctx?: Context) => new JobSpan(tracer.startSpan(name, options, ctx)) },
    contextManager: {
      with: (ctx: Context, fn) => manager.with(marked(ctx), fn),
      active: () => manager.active(),
      root: () => ROOT_CONTEXT.setValue(ROLE_KEY, role),
      getMetadata: (ctx: Context) => manager.getMetadata(ctx),
      fromMetadata: (active: Context, metadata: string) => manager.fromMetadata(active, metadata),
    },
  };
}

/** Starts one tracer provider per role and installs the global context manager, propagator and (routing) tracer provider. */
export function startSdk(config: TelemetryConfig, roles: readonly string[], secrets: Redactor): TracingRuntime {
  const version = packageVersion();
  const providers = new Map<string, NodeTracerProvider>();
  for (const role of roles) {
    const otlp = config.protocol === 'http/json' ? new JsonExporter({ url: config.tracesUrl }) : new ProtobufExporter({ url: config.tracesUrl });
    // Every span passes the one redaction before it leaves the process.
    const exporter = redactingExporter(otlp, secrets);
    providers.set(
      role,
      new NodeTracerProvider({
        resource: resourceFromAttributes({
          ...config.resourceAttributes,
          'service.name': `${config.serviceName}-${role}`,
          'service.version': version,
          'egress.role': role,
        }),
        sampler: samplerOf(config.sampler),
        spanProcessors: [new BatchSpanProcessor(exporter)],
      }),
    );
  }
  const fallback = roles[0];
  if (fallback === undefined) throw new Error('tracing needs at least one role');
  // One routing tracer per (name, version), each holding its tracer per role: no allocation per span.
  const routers = new Map<string, Tracer>();
  const routing: TracerProvider = {
    getTracer(name: string, tracerVersion?: string) {
      const key = `${name}@${tracerVersion ?? ''}`;
      let router = routers.get(key);
      if (!router) {
        const byRole = new Map([...providers].map(([role, provider]) => [role, provider.getTracer(name, tracerVersion)]));
        const fallbackTracer = byRole.get(fallback) as Tracer;
        router = new RoutingTracer((ctx) => {
          const role = ctx.getValue(ROLE_KEY);
          return (typeof role === 'string' ? byRole.get(role) : undefined) ?? fallbackTracer;
        });
        routers.set(key, router);
      }
      return router;
    },
  };
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(routing);
  setSpansExported(true);
  const bullmq = new Map([...providers].map(([role, provider]) => [role, bullmqTelemetry(role, provider)]));
  return {
    enabled: true,
    bullmq: (role) => bullmq.get(role),
    async flush() {
      await Promise.all([...providers.values()].map((p) => p.forceFlush()));
    },
    async shutdown() {
      await Promise.allSettled([...providers.values()].map((p) => p.shutdown()));
      setSpansExported(false);
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
