import type { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { openQueue } from '../../queues/consume.ts';
import { QUEUES } from '../../queues/names.ts';
import { silentLogger } from '../../src/logging.ts';
import { telemetryFromEnv } from '../../src/telemetry/config.ts';
import { withSpan } from '../../src/telemetry/spans.ts';
import { startTracing, type TracingRuntime } from '../../src/telemetry/tracing.ts';
import { createResultBatcher } from '../../workers/result-batcher.ts';
import { uniquePrefix } from '../support/config.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.ts';
import type { CheckResultData } from '../../src/health/check-result.ts';

let receiver: OtlpReceiver;
let tracing: TracingRuntime;
let queue: Queue;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  tracing = await startTracing(telemetryFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }), ['worker']);
  queue = openQueue(QUEUES.results, {
    connection: redisOptions(inject('redisUrl'), 'producer'),
    prefix: uniquePrefix(),
    settings: { backoffMs: 50, retention: { completed: 10, failed: 10 } },
    logger: silentLogger(),
    telemetry: tracing.bullmq('worker'),
  });
});
afterAll(async () => {
  await queue.obliterate({ force: true });
  await queue.close();
  await tracing.shutdown();
  await receiver.close();
});

function result(checkJobId: string): CheckResultData {
  return {
    provider: 'local',
    checkJobId,
    checkedAt: '2026-12-01T10:00:00.000Z',
    targets: [{ target: 'localhost', ready: true, reason: 'Ok', message: 'ok', details: {}, durationSeconds: 0 }],
  };
}

describe('a batch of results in the traces of its checks', () => {
  test('the batch continues the first check’s trace and links the others; its job is added under it', async () => {
    const sink = createResultBatcher(queue);
    // Three checks, each in its own trace, publishing in the same turn of the event loop.
    await Promise.all(['a', 'b', 'c'].map((id) => withSpan(`check ${id}`, {}, () => sink.publish(result(id)), { root: true })));
    await tracing.flush();
    const spans = await receiver.waitFor((all) => all.some((s) => s.name === 'results batch') && all.some((s) => s.name === 'add results.results'));
    const checks = ['a', 'b', 'c'].map((id) => spans.find((s) => s.name === `check ${id}`) as ReceivedSpan);
    expect(new Set(checks.map((c) => c.traceId)).size).toBe(3);
    const [first, ...others] = checks as [ReceivedSpan, ReceivedSpan, ReceivedSpan];
    const batch = spans.find((s) => s.name === 'results batch') as ReceivedSpan;
    expect(batch).toMatchObject({ traceId: first.traceId, parentSpanId: first.spanId, attributes: { 'egress.results': 3 } });
    expect(batch.links).toEqual(others.map((o) => ({ traceId: o.traceId, spanId: o.spanId })));
    expect(spans.find((s) => s.name === 'add results.results')).toMatchObject({ traceId: first.traceId, parentSpanId: batch.spanId });
  });
});
