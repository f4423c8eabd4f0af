/**
 * Tracing on or off for a process. Off (no OTLP endpoint configured) costs nothing: the SDK is
 * never imported and the OpenTelemetry API stays its no-op self. On, src/telemetry/sdk.ts is
 * loaded and each role gets its own service name (`<OTEL_SERVICE_NAME>-<role>`).
 */
import type { Telemetry } from 'bullmq';
import type { TelemetryConfig } from './config.ts';
import { NO_REDACTION, type Redactor } from '../secrets/secret-registry.ts';

export interface TracingRuntime {
  readonly enabled: boolean;
  /** BullMQ's telemetry option for a role's queues and workers; undefined when tracing is off. */
  bullmq(role: string): Telemetry | undefined;
  /** Exports every finished span now. */
  flush(): Promise<void>;
  /** Exports what is left and uninstalls the SDK. */
  shutdown(): Promise<void>;
}

export const TRACING_OFF: TracingRuntime = Object.freeze({
  enabled: false,
  bullmq: () => undefined,
  flush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
});

/**
 * Starts tracing for `roles` when `config` is set (the SDK is imported only then), or returns
 * TRACING_OFF. The OTel exporter itself reads the remaining standard variables
 * (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`, `…_COMPRESSION`, certificates) when it is created,
 * that is only when tracing is on. Every exported span passes `secrets`' redaction (redacting-exporter.ts).
 */
export async function startTracing(config: TelemetryConfig | undefined, roles: readonly string[], secrets: Redactor = NO_REDACTION): Promise<TracingRuntime> {
  if (!config || roles.length === 0) return TRACING_OFF;
  const { startSdk } = await import('./sdk.ts');
  return startSdk(config, roles, secrets);
}
