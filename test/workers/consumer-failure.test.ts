/**
 * A consumer that cannot run says so (its `stopped` rejects, with the cause), and every BullMQ
 * object closes within bounds, reporting what did not close: on a real Redis, and on a
 * redis-server of the test's own that it freezes (SIGSTOP) to make a close hang.
 */
import { Queue, QueueEvents, type Telemetry } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { closeAllBounded, closeBounded, CloseError } from '../../queues/bounded-close.ts';
import { redisOptions } from '../../queues/connection.ts';
import { consume, ConsumerFailedError, handle, type Consumer } from '../../queues/consume.ts';
import { QUEUES } from '../../queues/names.ts';
import { SharedDeadlines } from '../../src/abort.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { startRedisChild, type RedisChild } from '../../src/redis/redis-server.ts';
import { testConfig } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';

const noopJob = { queue: QUEUES.checks, name: 'noop', schema: z.strictObject({}), attempts: 1 } as const;

describe('a consumer that cannot run', () => {
  let config: AppConfig;
  const consumers: Consumer[] = [];
  beforeAll(() => {
    config = testConfig();
  });
  afterEach(async () => {
    await Promise.allSettled(consumers.splice(0).map((c) => c.close()));
  });

  const start = async (telemetry?: Telemetry): Promise<Consumer> => {
    const consumer = await consume(QUEUES.checks, [handle(noopJob, () => Promise.resolve())], {
      work: undefined,
      connection: redisOptions(config.redis.url ?? '', 'worker'),
      prefix: config.redis.prefix,
      settings: config,
      concurrency: 1,
      lockDurationMs: 5000,
      stalledIntervalMs: 5000,
      graceMs: 500,
      observer: { observe: () => undefined, observeWait: () => undefined },
      logger: silentLogger(),
      deadlines: (cancellation, ms) => new SharedDeadlines(ms, 50, undefined, cancellation),
      telemetry,
    });
    consumers.push(consumer);
    return consumer;
  };

  test('closed by its own close, it has stopped: `stopped` resolves', async () => {
    const consumer = await start();
    await consumer.close();
    await expect(consumer.stopped).resolves.toBeUndefined();
  });

  test('a BullMQ worker that ends its run loop without the consumer’s close fails the consumer', async () => {
    const consumer = await start();
    // Closed underneath the consumer, as nothing of ours would: it takes no more jobs.
    await consumer.worker.close();
    const err = await consumer.stopped.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConsumerFailedError);
    expect(err).toMatchObject({
      code: 'ERR_CONSUMER_FAILED',
      queue: 'checks',
      retryable: false,
      message: 'the checks consumer stopped taking jobs: its BullMQ worker ended its run loop without being closed',
    });
  });

  test('a run loop that rejects fails the consumer with that cause', async () => {
    // BullMQ starts the loop inside a span: a tracer that cannot start one makes `worker.run()` reject.
    const broken = new Error('the tracer is gone');
    const telemetry = {
      tracer: {
        startSpan: () => {
          throw broken;
        },
      },
      contextManager: { active: () => ({}), with: (_c: unknown, fn: () => unknown) => fn(), getMetadata: () => '', fromMetadata: (c: unknown) => c },
    } as unknown as Telemetry;
    const consumer = await start(telemetry);
    const err = await consumer.stopped.catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_CONSUMER_FAILED', message: 'the checks consumer stopped taking jobs: the tracer is gone' });
    expect((err as Error).cause).toBe(broken);
  });
});

describe('bounded closes', () => {
  let redis: RedisChild;
  let frozen = false;
  beforeAll(async () => {
    redis = await startRedisChild({ dir: await tempDir('bounded-close-redis-'), appendOnly: false });
  });
  afterEach(() => {
    if (frozen) process.kill(redis.pid, 'SIGCONT');
    frozen = false;
  });
  afterAll(async () => {
    await redis.stop();
  });
  const freeze = (): void => {
    process.kill(redis.pid, 'SIGSTOP');
    frozen = true;
  };

  test('a queue and queue events that close close quietly', async () => {
    const queue = new Queue('quiet', { connection: redisOptions(redis.url, 'producer') });
    const events = new QueueEvents('quiet', { connection: redisOptions(redis.url, 'worker') });
    await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
    await expect(closeAllBounded([queue, events], { logger: silentLogger() })).resolves.toBeUndefined();
  });

  test('a close that hangs on a Redis that stopped answering ends in its bound, drops the connections and says which did not close', async () => {
    const queue = new Queue('hung', { connection: redisOptions(redis.url, 'worker') });
    const events = new QueueEvents('hung', { connection: redisOptions(redis.url, 'worker') });
    // The dropped connections report "Connection is closed": expected here.
    queue.on('error', () => undefined);
    events.on('error', () => undefined);
    await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
    freeze();
    const one = await closeBounded(queue, { logger: silentLogger(), graceMs: 300 }).catch((e: unknown) => e);
    expect(one).toBeInstanceOf(CloseError);
    expect(one).toMatchObject({
      code: 'ERR_CLOSE_TIMEOUT',
      what: 'the hung queue',
      message: 'the hung queue did not close within 300 ms: its Redis connections were dropped',
    });
    const both = await closeAllBounded([events], { logger: silentLogger(), graceMs: 300 }).catch((e: unknown) => e);
    expect(both).toBeInstanceOf(AggregateError);
    expect((both as AggregateError).errors).toEqual([expect.objectContaining({ code: 'ERR_CLOSE_TIMEOUT', what: 'the hung queue events' })]);
  });
});
