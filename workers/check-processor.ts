import { parseJobData } from '../queues/jobs.ts';
import { QUEUES } from '../queues/names.ts';
import { EgressError } from '../src/errors.ts';
import { runCheck } from '../src/checks/run-check.ts';
import type { Logger } from '../src/logging.ts';
import type { Provider } from '../src/providers/types.ts';
import type { TargetResult } from '../src/health/types.ts';
import { truncateMessage } from '../src/health/message.ts';
import { NO_REDACTION, type Redactor } from '../src/secrets/secret-registry.ts';
import { recordSpan, withSpan } from '../src/telemetry/spans.ts';
import type { LimitFunction } from 'p-limit';
import type { ResultSink } from './result-batcher.ts';
import { JOBS } from '../src/work/jobs.ts';
import type { CheckResultData } from '../src/health/check-result.ts';
import { handleWork, type WorkJobHandler } from './consumer.ts';

export interface CheckProcessorDeps {
  providers: ReadonlyMap<string, Provider>;
  /** The durable `results` queue, through a batcher (result-batcher.ts). */
  results: ResultSink;
  /**
   * Bounds the checks that run at once (`--concurrency`). The worker takes more jobs than that,
   * so that a job waiting for its result to be stored does not hold a check's place.
   */
  checkSlots: LimitFunction;
  logger: Logger;
  /** The process's secret registry: a target's message and details pass its redaction before they leave the worker. */
  secrets?: Redactor;
}

/** A target as it leaves the worker: a checker quotes its peer's error (which may quote a token), so message and details are redacted, then cut. */
function redactedTarget(t: TargetResult, secrets: Redactor): TargetResult {
  const details = Object.fromEntries(Object.entries(t.details).map(([k, v]) => [k, secrets.redact(v)]));
  return { ...t, message: truncateMessage(secrets.redact(t.message)), details };
}

/** The job itself was cancelled (the worker's shutdown): not a verdict on the provider, so it is retried. */
export class CheckInterruptedError extends EgressError {
  constructor(cause: unknown) {
    super('ERR_CHECK_INTERRUPTED', 'the check job was cancelled before it finished', { cause, retryable: true });
  }
}

/** A provider this worker does not know: no retry of this job will find it. */
export class UnknownProviderError extends EgressError {
  constructor(provider: string) {
    super('ERR_UNKNOWN_PROVIDER', `provider "${provider}" is not configured in this worker`, { retryable: false });
  }
}

/** A checker returned a result that does not match the result schema: the same check would again. */
export class MalformedResultError extends EgressError {
  constructor(provider: string, cause: Error) {
    super('ERR_MALFORMED_RESULT', `provider ${provider} returned a malformed result: ${cause.message}`, { cause, retryable: false });
  }
}

/** One span per target under the check's: it began with the check and took the target's duration. */
function targetSpan(provider: string, t: TargetResult, startedMs: number): void {
  recordSpan(
    'check target',
    {
      'egress.provider': provider,
      'egress.target': t.target,
      'egress.check.reason': t.reason,
      'egress.check.ready': t.ready,
      ...(t.ready ? {} : { 'error.type': t.reason }),
    },
    startedMs,
    startedMs + t.durationSeconds * 1000,
  );
}

/**
 * Handles one `check` job: runs the provider's check under the job's deadline (started once
 * the check has a slot) and puts the result on the durable `results` queue. A target that runs
 * past the deadline is a `Timeout` result, not a failed job.
 */
export function checkHandler(deps: CheckProcessorDeps): WorkJobHandler {
  return handleWork(JOBS.check, async (data, ctx): Promise<CheckResultData> => {
    const provider = deps.providers.get(data.provider);
    if (!provider) throw new UnknownProviderError(data.provider);
    const jobId = ctx.job.id ?? 'unknown';

    // The deadline starts with the check, not while the job waited for a place.
    const { checkedAt, targets } = await deps.checkSlots(() =>
      ctx.deadline((limit) =>
        withSpan('check', { 'egress.provider': provider.name, 'egress.check.trigger': data.trigger, 'messaging.message.id': jobId }, async () => {
          const startedMs = Date.now();
          const secrets = deps.secrets ?? NO_REDACTION;
          const targets = (await runCheck(provider, limit)).map((t) => redactedTarget(t, secrets));
          const checked = { checkedAt: new Date(startedMs).toISOString(), targets };
          for (const t of checked.targets) targetSpan(provider.name, t, startedMs);
          return checked;
        }),
      ),
    );
    const cancelled = ctx.cancelled();
    if (cancelled) throw new CheckInterruptedError(cancelled.reason);

    // Validated on this end too: a checker returning a malformed result fails here, not in the publisher.
    let result: CheckResultData;
    try {
      result = parseJobData(JOBS.result.schema, QUEUES.results, { provider: provider.name, checkJobId: jobId, checkedAt, targets } satisfies CheckResultData);
    } catch (err) {
      throw new MalformedResultError(provider.name, err as Error);
    }
    await deps.results.publish(result);
    // One line per target at info; a process logging less (a terminal's quiet default) builds no child logger per check.
    if (deps.logger.isLevelEnabled('info')) {
      const log = deps.logger.child({ jobId, queue: QUEUES.checks, provider: provider.name, trigger: data.trigger });
      for (const t of targets) log.info({ target: t.target, ready: t.ready, reason: t.reason, durationSeconds: t.durationSeconds }, 'checked target');
    }
    return result;
  });
}
