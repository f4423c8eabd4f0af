import { trace } from '@opentelemetry/api';
import { describe, expect, test, vi } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { buildServerConfig, SERVER_FLAG_DEFAULTS } from '../../src/cli/server-config.ts';
import { telemetryFromEnv } from '../../src/telemetry/config.ts';
import { runCli } from '../support/cli.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { startOtlpReceiver } from '../support/otlp-receiver.ts';

describe('tracing settings from the OTEL_* variables', () => {
  test('off without an endpoint, with OTEL_SDK_DISABLED, or with OTEL_TRACES_EXPORTER=none', () => {
    expect(telemetryFromEnv({})).toBeUndefined();
    expect(telemetryFromEnv({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBeUndefined();
    expect(telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });

  test('the base endpoint gets /v1/traces; the traces endpoint is taken as it is and wins', () => {
    expect(telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toEqual({
      tracesUrl: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      serviceName: 'egress',
      resourceAttributes: {},
      sampler: { name: 'parentbased_always_on', ratio: 1 },
    });
    expect(telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/custom/path' })?.tracesUrl).toBe(
      'https://b/custom/path',
    );
  });

  test('protocol, service name, resource attributes and sampler', () => {
    const config = telemetryFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attrs, deployment.environment=prod,team=a%2Cb',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    expect(config).toMatchObject({
      protocol: 'http/json',
      serviceName: 'from-attrs',
      resourceAttributes: { 'deployment.environment': 'prod', team: 'a,b' },
      sampler: { name: 'parentbased_traceidratio', ratio: 0.25 },
    });
    expect(
      telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'mine', OTEL_RESOURCE_ATTRIBUTES: 'service.name=x' })?.serviceName,
    ).toBe('mine');
  });

  test.each([
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://c/v1/traces' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://user:secret@c:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'OTEL_EXPORTER_OTLP_PROTOCOL'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'sometimes' }, 'OTEL_TRACES_SAMPLER'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }, 'OTEL_TRACES_SAMPLER_ARG'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_RESOURCE_ATTRIBUTES: 'novalue' }, 'OTEL_RESOURCE_ATTRIBUTES'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'zipkin' }, 'OTEL_TRACES_EXPORTER'],
  ])('%o is a ConfigError naming %s', (env, variable) => {
    let caught: unknown;
    try {
      telemetryFromEnv(env);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).path).toBe(variable);
    expect((caught as ConfigError).message).not.toContain('secret');
  });
});

describe('the server configuration', () => {
  test('carries the tracing settings of the environment it was given, frozen; a bad variable fails like a bad flag', async () => {
    const flags = { ...SERVER_FLAG_DEFAULTS, dataDir: await tempDir('egress-otel-config-') };
    const off = await buildServerConfig(flags, { defaultProviders: true, servesApi: true });
    expect(off.telemetry).toBeUndefined();
    const on = await buildServerConfig(
      { ...flags, otelEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' } },
      { defaultProviders: true, servesApi: true },
    );
    expect(on.telemetry?.tracesUrl).toBe('http://127.0.0.1:4318/v1/traces');
    expect(Object.isFrozen(on.telemetry)).toBe(true);
    await expect(
      buildServerConfig(
        { ...flags, otelEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' } },
        { defaultProviders: true, servesApi: true },
      ),
    ).rejects.toThrow(/^OTEL_EXPORTER_OTLP_PROTOCOL: /);
  });
});

describe('the command line', () => {
  test('hands the environment’s OTEL_* variables to the server configuration: a bad one is a usage error naming it', async () => {
    const dataDir = await tempDir('egress-otel-cli-');
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' };
    const bad = await runCli(['worker', '--check-config', '--data-dir', dataDir], env);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf or http/json');
    const good = await runCli(['worker', '--check-config', '--data-dir', dataDir], { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    expect(good).toMatchObject({ code: 0 });
  });
});

describe('off at zero cost', () => {
  test('without an endpoint the SDK module is never imported and spans do not record; with one it is, and they do', async () => {
    const imported = vi.fn();
    vi.doMock('../../src/telemetry/sdk.ts', async (importOriginal) => {
      imported();
      return importOriginal();
    });
    const { startTracing, TRACING_OFF } = await import('../../src/telemetry/tracing.ts');
    const off = await startTracing(undefined, ['worker']);
    expect(off).toBe(TRACING_OFF);
    expect(off.bullmq('worker')).toBeUndefined();
    expect(imported).not.toHaveBeenCalled();
    const idle = trace.getTracer('t').startSpan('idle');
    expect(idle.isRecording()).toBe(false);
    idle.end();

    // The control: the same call with an endpoint loads the SDK and records.
    const receiver = await startOtlpReceiver();
    try {
      const on = await startTracing(telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }), ['worker']);
      expect(imported).toHaveBeenCalledTimes(1);
      expect(on.bullmq('worker')).toBeDefined();
      const live = trace.getTracer('t').startSpan('live');
      expect(live.isRecording()).toBe(true);
      live.end();
      await on.shutdown();
      const spans = await receiver.waitFor((all) => all.some((s) => s.name === 'live'));
      expect(spans.find((s) => s.name === 'live')?.service).toBe('egress-worker');
      // Uninstalled again: back to the no-op API.
      expect(trace.getTracer('t').startSpan('after').isRecording()).toBe(false);
    } finally {
      await receiver.close();
      vi.doUnmock('../../src/telemetry/sdk.ts');
    }
  });
});
