/**
 * Tracing settings, read once from the standard OpenTelemetry environment variables at the entry
 * point (src/cli/server-config.ts) and frozen into the AppConfig. Tracing is on only when an OTLP
 * endpoint is set; without one nothing below loads the SDK.
 */
import { ConfigError } from '../errors.ts';

/** The `OTEL_*` variables, as the process environment hands them over. */
export type OtelEnv = Readonly<Partial<Record<`OTEL_${string}`, string>>>;

export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

export const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
export type SamplerName = (typeof SAMPLERS)[number];

export interface TelemetryConfig {
  /** Where spans are POSTed: the traces endpoint as given, or the base endpoint + `/v1/traces`. */
  tracesUrl: string;
  protocol: OtlpProtocol;
  /** `OTEL_SERVICE_NAME` (default `egress`); each role reports as `<name>-<role>`. */
  serviceName: string;
  /** `OTEL_RESOURCE_ATTRIBUTES`, decoded. */
  resourceAttributes: Readonly<Record<string, string>>;
  sampler: { name: SamplerName; ratio: number };
}

export const DEFAULT_SERVICE_NAME = 'egress';

function httpUrl(variable: string, text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(variable, `expected an http:// or https:// URL, got "${text}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(variable, `expected an http:// or https:// URL, got "${url.protocol}"`);
  if (url.username || url.password) throw new ConfigError(variable, 'must not carry credentials; put them in OTEL_EXPORTER_OTLP_HEADERS');
  return url;
}

/** `key1=value1,key2=value2` with percent-encoded values (the OTel resource format). */
export function parseResourceAttributes(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text?.trim()) return out;
  for (const pair of text.split(',')) {
    if (!pair.trim()) continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new ConfigError('OTEL_RESOURCE_ATTRIBUTES', `expected key=value pairs separated by commas, got "${pair.trim()}"`);
    const key = pair.slice(0, eq).trim();
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      throw new ConfigError('OTEL_RESOURCE_ATTRIBUTES', `the value of "${key}" is not valid percent-encoding`);
    }
    out[key] = value;
  }
  return out;
}

function parseSampler(env: OtelEnv): TelemetryConfig['sampler'] {
  const name = (env.OTEL_TRACES_SAMPLER?.trim() || 'parentbased_always_on') as SamplerName;
  if (!SAMPLERS.includes(name)) throw new ConfigError('OTEL_TRACES_SAMPLER', `expected one of ${SAMPLERS.join(', ')}, got "${name}"`);
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  let ratio = 1;
  if (name.endsWith('traceidratio') && arg) {
    ratio = Number(arg);
    if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `expected a number from 0 to 1, got "${arg}"`);
  }
  return { name, ratio };
}

/**
 * The tracing settings in `env`, or undefined (tracing off) when neither
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` nor `OTEL_EXPORTER_OTLP_ENDPOINT` is set, or when
 * `OTEL_SDK_DISABLED` is true. Bad values are a ConfigError naming the variable.
 */
export function telemetryFromEnv(env: OtelEnv): TelemetryConfig | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  let tracesUrl: string;
  if (tracesEndpoint) {
    tracesUrl = httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', tracesEndpoint).toString();
  } else if (endpoint) {
    const base = httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT', endpoint).toString();
    tracesUrl = `${base.replace(/\/+$/, '')}/v1/traces`;
  } else {
    return undefined;
  }
  const protocolVariable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = (env[protocolVariable]?.trim() || 'http/protobuf') as OtlpProtocol;
  if (!OTLP_PROTOCOLS.includes(protocol))
    throw new ConfigError(protocolVariable, `expected ${OTLP_PROTOCOLS.join(' or ')} (grpc is not supported), got "${protocol}"`);
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporter && exporter !== 'otlp' && exporter !== 'none') throw new ConfigError('OTEL_TRACES_EXPORTER', `expected otlp or none, got "${exporter}"`);
  if (exporter === 'none') return undefined;
  const resourceAttributes = parseResourceAttributes(env.OTEL_RESOURCE_ATTRIBUTES);
  return {
    tracesUrl,
    protocol,
    serviceName: env.OTEL_SERVICE_NAME?.trim() || resourceAttributes['service.name'] || DEFAULT_SERVICE_NAME,
    resourceAttributes,
    sampler: parseSampler(env),
  };
}
