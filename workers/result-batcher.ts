import { createHash } from 'node:crypto';
import { context, trace, type Context, type Link } from '@opentelemetry/api';
import type { Queue } from 'bullmq';
import { enqueue } from '../queues/jobs.ts';
import { safeJobId } from '../queues/names.ts';
import { withSpan } from '../src/telemetry/spans.ts';
import { JOBS } from '../src/work/jobs.ts';
import type { CheckResultData } from '../src/health/check-result.ts';

/** Where check results go: `publish` settles once the result is durably on the `results` queue. */
export interface ResultSink {
  publish(result: CheckResultData): Promise<void>;
}

interface Pending {
  result: CheckResultData;
  /** The publishing check's trace context: the batch's job continues the first one's trace and links the others. */
  context: Context;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The batch's job id: the same results give the same id, so re-adding an identical batch adds nothing. */
function batchJobId(batch: readonly Pending[]): string {
  const first = batch[0];
  if (batch.length === 1 && first) return safeJobId('result', first.result.checkJobId);
  const ids = createHash('sha256');
  for (const p of batch) ids.update(p.result.checkJobId).update('\0');
  return safeJobId('results', ids.digest('hex').slice(0, 32));
}

/**
 * Group commit of check results onto the `results` queue: results published in the same turn
 * of the event loop, or while an add is in flight, go out together as one job (at most
 * `maxBatch` a job) once that turn ends and no add is in flight. An idle worker adds well under
 * a millisecond; a busy one puts one job on the queue for many checks, which is what keeps the
 * pipeline's cost per check close to one BullMQ job (docs/benchmarks.md).
 *
 * A failed add rejects every `publish` of that batch, so each check job fails and is retried:
 * a result is never acknowledged before it is on the queue.
 */
/**
 * A batch of several checks' results: its job continues the first check's trace, under a span
 * that links every other check's span (a fan-in), so each check's trace leads to the write.
 */
function addBatch(queue: Queue, batch: readonly Pending[], jobId: string): Promise<unknown> {
  const links: Link[] = [];
  for (const p of batch.slice(1)) {
    const span = trace.getSpan(p.context);
    if (span) links.push({ context: span.spanContext() });
  }
  const parent = batch[0]?.context ?? context.active();
  return context.with(parent, () =>
    withSpan('results batch', { 'egress.results': batch.length }, () => enqueue(queue, JOBS.results, { results: batch.map((p) => p.result) }, { jobId }), {
      links,
    }),
  );
}

export function createResultBatcher(queue: Queue, options: { maxBatch?: number } = {}): ResultSink {
  const maxBatch = options.maxBatch ?? 200;
  const waiting: Pending[] = [];
  let inFlight = false;
  let scheduled = false;

  /** Flushes after the current turn of the event loop, so that checks finishing together share a job. */
  function schedule(): void {
    if (scheduled || inFlight) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      flush();
    });
  }

  function flush(): void {
    if (inFlight || waiting.length === 0) return;
    const batch = waiting.splice(0, maxBatch);
    inFlight = true;
    const jobId = batchJobId(batch);
    const first = batch[0];
    const added =
      batch.length === 1 && first ? context.with(first.context, () => enqueue(queue, JOBS.result, first.result, { jobId })) : addBatch(queue, batch, jobId);
    added
      .then(
        () => {
          for (const p of batch) p.resolve();
        },
        (err: unknown) => {
          for (const p of batch) p.reject(err);
        },
      )
      .finally(() => {
        inFlight = false;
        schedule();
      });
  }

  return {
    publish(result) {
      return new Promise<void>((resolve, reject) => {
        waiting.push({ result, context: context.active(), resolve, reject });
        schedule();
      });
    },
  };
}
