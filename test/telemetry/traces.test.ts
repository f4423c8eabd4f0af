import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig, type AppConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { telemetryFromEnv, type OtelEnv } from '../../src/telemetry/config.ts';
import { testConfig } from '../support/config.ts';
import { descendsFrom, parentOf, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.ts';
import { waitFor } from '../support/wait.ts';

const TOKEN = 'tok-traces-3f9c1d2e7a4b';
const PRODUCER = 4;
const CONSUMER = 5;

function tracedConfig(base: AppConfig, env: OtelEnv): AppConfig {
  return freezeConfig({ ...base, telemetry: telemetryFromEnv(env) });
}

function api(roles: RunningRoles, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${roles.api?.url ?? ''}${path}`, { ...init, headers: { authorization: `Bearer ${TOKEN}`, ...init.headers } });
}

const one = (spans: readonly ReceivedSpan[], pred: (s: ReceivedSpan) => boolean): ReceivedSpan | undefined => spans.find(pred);

/** Every export body, as text, holds none of `secrets` (protobuf strings are their UTF-8 bytes). */
function expectNoSecrets(receiver: OtlpReceiver, secrets: readonly string[]): void {
  expect(receiver.requests.length).toBeGreaterThan(0);
  for (const { body } of receiver.requests)
    for (const secret of secrets) expect(body.includes(Buffer.from(secret)), `an export carries "${secret}"`).toBe(false);
}

describe('traces of an ad-hoc check (OTLP http/json)', () => {
  let receiver: OtlpReceiver;
  let roles: RunningRoles;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const config = tracedConfig(testConfig({ queues: ['checks'], tokens: [TOKEN] }), {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'egress-test',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
    });
    roles = await runRoles(config, ['publisher', 'worker', 'scheduler', 'api'], silentLogger());
  });
  afterAll(async () => {
    await roles.close();
    await receiver.close();
  });

  test('one trace from the API’s enqueue through the worker’s check, one span per target, to the publisher’s write', async () => {
    const res = await api(roles, '/v1/providers/local/checks?wait=true', { method: 'POST' });
    expect(res.status).toBe(200);
    const { jobId } = (await res.json()) as { jobId: string };
    // The publisher has written when the status shows up; its spans end right after.
    await waitFor('the published ProviderHealth', async () => (await api(roles, '/v1/providerhealths/local')).status === 200);
    await roles.tracing.flush();

    const isAdd = (s: ReceivedSpan): boolean => s.name === 'add checks.check' && s.attributes['bullmq.job.id'] === jobId;
    const spans = await receiver.waitFor((all) => {
      const add = one(all, isAdd);
      return !!add && all.some((s) => s.traceId === add.traceId && s.name === 'write provider health' && s.service === 'egress-test-publisher');
    });
    const add = one(spans, isAdd) as ReceivedSpan;
    const trace = spans.filter((s) => s.traceId === add.traceId);

    expect(add).toMatchObject({ service: 'egress-test-api', kind: PRODUCER, parentSpanId: '' });
    const process = one(trace, (s) => s.name === 'process checks');
    expect(process).toMatchObject({ service: 'egress-test-worker', kind: CONSUMER, parentSpanId: add.spanId });
    // BullMQ's completion event, without a copy of the job's return value (the check's result is its target spans).
    const completed = process?.events.find((e) => e.name === 'job completed');
    expect(completed).toBeDefined();
    expect(completed?.attributes).not.toHaveProperty('bullmq.job.result');
    expect(one(trace, (s) => s.name === 'complete checks')).toMatchObject({ service: 'egress-test-worker', parentSpanId: process?.spanId });
    const check = one(trace, (s) => s.name === 'check');
    expect(check).toMatchObject({
      service: 'egress-test-worker',
      parentSpanId: process?.spanId,
      attributes: { 'egress.provider': 'local', 'egress.check.trigger': 'adhoc' },
    });
    const targets = trace.filter((s) => s.name === 'check target');
    expect(targets).toHaveLength(1);
    expect(targets[0]).toMatchObject({
      parentSpanId: check?.spanId,
      attributes: { 'egress.provider': 'local', 'egress.target': 'localhost', 'egress.check.reason': 'Ok', 'egress.check.ready': true },
    });
    const addResult = one(trace, (s) => s.name.startsWith('add results.'));
    expect(addResult).toMatchObject({ service: 'egress-test-worker', kind: PRODUCER });
    expect(descendsFrom(trace, addResult as ReceivedSpan, process as ReceivedSpan)).toBe(true);
    const publish = one(trace, (s) => s.name === 'process results');
    expect(publish).toMatchObject({ service: 'egress-test-publisher', kind: CONSUMER, parentSpanId: addResult?.spanId });
    const write = one(trace, (s) => s.name === 'write provider health');
    expect(write).toMatchObject({ attributes: { 'egress.provider': 'local', 'egress.results': 1 } });
    expect(descendsFrom(trace, write as ReceivedSpan, publish as ReceivedSpan)).toBe(true);

    expect(receiver.requests.every((r) => r.contentType === 'application/json')).toBe(true);
    expectNoSecrets(receiver, [TOKEN]);
  });
});

describe('traces of a proxy’s apply → Ready (OTLP http/protobuf, the default)', () => {
  let receiver: OtlpReceiver;
  let roles: RunningRoles;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const config = tracedConfig(testConfig({ queues: ['reconcile'], tokens: [TOKEN] }), { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    roles = await runRoles(config, ['worker', 'api'], silentLogger());
  });
  afterAll(async () => {
    const { items } = (await (await api(roles, '/v1/proxies')).json()) as { items: ProxyView[] };
    for (const p of items) await api(roles, `/v1/proxies/${p.name}`, { method: 'DELETE' });
    await waitFor('every proxy gone', async () => ((await (await api(roles, '/v1/proxies')).json()) as { items: unknown[] }).items.length === 0, 30_000);
    await roles.close();
    await receiver.close();
  });

  test('the reconcile’s trace holds its readiness probe; nothing exported carries the proxy’s password or the API token', async () => {
    const applied = await api(roles, '/v1/proxies', {
      method: 'POST',
      headers: { 'content-type': 'application/yaml' },
      body: 'kind: Proxy\nmetadata: { name: traced-1 }\nspec: { provider: local }\n',
    });
    expect(applied.status).toBe(200);
    const ready = await waitFor(
      'traced-1 Ready',
      async () => ((await (await api(roles, '/v1/proxies?ready=true')).json()) as { items: ProxyView[] }).items[0],
      30_000,
    );
    const password = decodeURIComponent(new URL(ready.proxyUrl ?? 'http://x').password);
    expect(password.length).toBeGreaterThan(10);

    const isAdd = (s: ReceivedSpan): boolean => s.name === 'add reconcile.reconcile' && s.service === 'egress-api';
    const isProbe = (s: ReceivedSpan): boolean => s.name === 'readiness probe' && s.attributes['egress.probe.ok'] === true;
    // The proxy shows Ready once the job wrote the status; the job's `process reconcile` span ends
    // only after the job itself does, so it can miss a flush made at Ready: flush until it is there.
    const spans = await waitFor('the reconcile’s process span holding its probe, exported', async () => {
      await roles.tracing.flush();
      const all = [...receiver.spans];
      const add = one(all, isAdd);
      const trace = add ? all.filter((s) => s.traceId === add.traceId) : [];
      const probe = one(trace, isProbe);
      return probe && trace.some((s) => s.name === 'process reconcile' && descendsFrom(trace, probe, s)) ? all : undefined;
    });
    const add = one(spans, isAdd) as ReceivedSpan;
    const trace = spans.filter((s) => s.traceId === add.traceId);
    expect(add).toMatchObject({ kind: PRODUCER, parentSpanId: '' });
    const processes = trace.filter((s) => s.name === 'process reconcile');
    expect(processes.length).toBeGreaterThan(0);
    for (const p of processes) expect(p).toMatchObject({ service: 'egress-worker', kind: CONSUMER, parentSpanId: add.spanId });
    const probe = one(trace, isProbe) as ReceivedSpan;
    expect(probe.service).toBe('egress-worker');
    expect(processes.some((p) => descendsFrom(trace, probe, p))).toBe(true);
    expect(parentOf(trace, probe)).toBeDefined();

    expect(receiver.requests.every((r) => r.contentType === 'application/x-protobuf')).toBe(true);
    expectNoSecrets(receiver, [password, TOKEN]);
  });
});

describe('traces of scheduled checks', () => {
  let receiver: OtlpReceiver;
  let roles: RunningRoles;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const config = tracedConfig(testConfig({ queues: ['checks'], intervalMs: 10_000 }), { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    roles = await runRoles(config, ['publisher', 'worker', 'scheduler'], silentLogger());
  });
  afterAll(async () => {
    await roles.close();
    await receiver.close();
  });

  test('each scheduled check starts a trace of its own, not one under the upsert of its scheduler', async () => {
    // The scheduler's new job scheduler produces a check at once; its spans arrive with the next batch export.
    const isScheduled = (s: ReceivedSpan): boolean => s.name === 'check' && s.attributes['egress.check.trigger'] === 'schedule';
    const spans = await receiver.waitFor((all) => all.some(isScheduled));
    const check = spans.find(isScheduled) as ReceivedSpan;
    const process = parentOf(spans, check);
    expect(process).toMatchObject({ name: 'process checks', service: 'egress-worker', parentSpanId: '' });
  });
});
