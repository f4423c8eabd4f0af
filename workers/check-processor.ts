import { UnrecoverableError, type Job } from 'bullmq';
import { checkJobSchema, checkResultSchema, parseJobData, type CheckResultData } from '../queues/jobs.ts';
import { QUEUES } from '../queues/names.ts';
import { withDeadline } from '../src/abort.ts';
import { EgressError } from '../src/errors.ts';
import { runCheck } from '../src/health/run-check.ts';
import type { Logger } from '../src/logging.ts';
import type { Provider } from '../src/providers/types.ts';
import type { LimitFunction } from 'p-limit';
import type { ResultSink } from './result-batcher.ts';

export interface CheckProcessorDeps {
  providers: ReadonlyMap<string, Provider>;
  /** The durable `results` queue, through a batcher (result-batcher.ts). */
  results: ResultSink;
  /** The per-check deadline (`--provider-check-timeout`, resolved). */
  timeoutMs: number;
  /**
   * Bounds the checks that run at once (`--concurrency`). The worker takes more jobs than that,
   * so that a job waiting for its result to be stored does not hold a check's place.
   */
  checkSlots: LimitFunction;
  logger: Logger;
}

/** The job itself was cancelled (shutdown, a lost lock): not a verdict on the provider, so it is retried. */
export class CheckInterruptedError extends EgressError {
  constructor(cause: unknown) {
    super('ERR_CHECK_INTERRUPTED', 'the check job was cancelled before it finished', { cause, retryable: true });
  }
}

/**
 * Processes one `checks` job: runs the provider's check under the job's deadline (its own
 * AbortSignal combined with the check timeout) and puts the result on the durable `results`
 * queue. A target that runs past the deadline is a `Timeout` result, not a failed job.
 *
 * BullMQ creates the job's AbortSignal only for processors that declare three parameters,
 * so the returned function keeps that arity.
 */
export function createCheckProcessor(deps: CheckProcessorDeps) {
  return async function processCheck(job: Job, _token: string | undefined, signal: AbortSignal | undefined): Promise<CheckResultData> {
    let data;
    try {
      data = parseJobData(checkJobSchema, QUEUES.checks, job.data);
    } catch (err) {
      throw new UnrecoverableError((err as Error).message);
    }
    const provider = deps.providers.get(data.provider);
    if (!provider) throw new UnrecoverableError(`provider "${data.provider}" is not configured in this worker`);
    const jobId = job.id ?? 'unknown';
    const log = deps.logger.child({ jobId, queue: QUEUES.checks, provider: provider.name, trigger: data.trigger });

    // The deadline starts with the check, not while the job waited for a place.
    const { checkedAt, targets } = await deps.checkSlots(() =>
      withDeadline(signal, deps.timeoutMs, async (limit) => ({ checkedAt: new Date().toISOString(), targets: await runCheck(provider, limit) })),
    );
    if (signal?.aborted) throw new CheckInterruptedError(signal.reason);

    // Validated on this end too: a checker returning a malformed result fails here, not in the publisher.
    let result: CheckResultData;
    try {
      result = parseJobData(checkResultSchema, QUEUES.results, { provider: provider.name, checkJobId: jobId, checkedAt, targets } satisfies CheckResultData);
    } catch (err) {
      throw new UnrecoverableError(`provider ${provider.name} returned a malformed result: ${(err as Error).message}`);
    }
    await deps.results.publish(result);
    for (const t of targets) {
      log.info({ target: t.target, ready: t.ready, reason: t.reason, durationSeconds: t.durationSeconds }, 'checked target');
    }
    return result;
  };
}
