import { QueueEvents, Worker } from 'bullmq';
import type { JobLog } from './log.ts';

/**
 * Anything BullMQ keeps connected to Redis: a Queue, Worker, QueueEvents, QueueEventsProducer,
 * FlowProducer. Each has a name, a `close()` that may wait on Redis, and a `disconnect()` that
 * drops its connections.
 */
export interface BullmqConnected {
  readonly name: string;
  close(): Promise<void>;
  disconnect(): Promise<void>;
}

/**
 * A close that did not end well: `ERR_CLOSE_TIMEOUT` when it did not finish in its bound and the
 * object's connections were dropped instead, `ERR_CLOSE_FAILED` when it rejected (`cause`).
 * `what` names the object (`the checks worker`).
 */
export class CloseError extends Error {
  readonly code: 'ERR_CLOSE_TIMEOUT' | 'ERR_CLOSE_FAILED';
  readonly what: string;
  constructor(code: 'ERR_CLOSE_TIMEOUT' | 'ERR_CLOSE_FAILED', what: string, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'CloseError';
    this.code = code;
    this.what = what;
  }
}

export interface CloseBounds {
  logger: JobLog;
  /**
   * A Worker: how long running jobs get to finish before their signals are aborted. Anything
   * else: how long `close()` may take before its connections are dropped. Default 2 s.
   */
  graceMs?: number;
  /** The object in messages; default `the <name> worker|queue|queue events`. */
  what?: string;
  /**
   * A Worker: ends the signals of its running jobs when the grace period is over (the consumer
   * owns them: queues/consume.ts), beside BullMQ's own `cancelAllJobs`.
   */
  cancelRunning?: (reason: string) => void;
}

/** How long anything but a worker may take to close, and how long a forced step may take. */
const CLOSE_MS = 2000;
const FORCE_CLOSE_MS = 3000;

type Outcome = 'closed' | 'timeout' | { failed: unknown };

function within(promise: Promise<unknown>, ms: number): Promise<Outcome> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
    timer.unref();
  });
  const settled = promise.then(
    () => 'closed' as const,
    (err: unknown) => ({ failed: err }),
  );
  return Promise.race([settled, late]).finally(() => clearTimeout(timer));
}

function describe(target: BullmqConnected): string {
  const kind = target instanceof Worker ? 'worker' : target instanceof QueueEvents ? 'queue events' : 'queue';
  return `the ${target.name} ${kind}`;
}

/** Drops the connections of something whose close did not finish; never waits longer than a forced step. */
async function drop(target: BullmqConnected, what: string, waitedMs: number, logger: JobLog): Promise<never> {
  logger.warn({ queue: target.name, waitedMs }, `${what} did not close: dropping its Redis connections`);
  await within(target.disconnect(), FORCE_CLOSE_MS);
  throw new CloseError('ERR_CLOSE_TIMEOUT', what, `${what} did not close within ${waitedMs} ms: its Redis connections were dropped`);
}

function failed(what: string, err: unknown): CloseError {
  return new CloseError('ERR_CLOSE_FAILED', what, `${what} failed to close: ${err instanceof Error ? err.message : String(err)}`, err);
}

/**
 * Bounded two-stage close of a BullMQ worker: stop fetching and wait up to `graceMs` for
 * running jobs; then abort their signals and wait a little more; then close without waiting for
 * them (another worker's stalled-job check recovers them). Only when even that does not finish
 * are its connections dropped, and that is reported.
 */
async function closeWorker(
  worker: Pick<Worker, 'name' | 'close' | 'cancelAllJobs' | 'disconnect'>,
  graceMs: number,
  what: string,
  logger: JobLog,
  cancelRunning?: (reason: string) => void,
): Promise<void> {
  const closing = worker.close();
  let outcome = await within(closing, graceMs);
  if (outcome === 'timeout') {
    logger.warn({ queue: worker.name, graceMs }, 'jobs still running after the grace period: aborting them');
    worker.cancelAllJobs('shutdown');
    cancelRunning?.('shutdown');
    outcome = await within(closing, Math.min(graceMs, 5000));
  }
  if (outcome === 'timeout') {
    logger.warn({ queue: worker.name }, 'jobs ignored the abort: closing without waiting; the stalled check will requeue them');
    outcome = await within(worker.close(true), FORCE_CLOSE_MS);
  }
  // Seen on a Redis Cluster right after a master died: BullMQ's close can wait for good on a
  // blocking command to a node that is gone.
  if (outcome === 'timeout') await drop(worker, what, graceMs + Math.min(graceMs, 5000) + FORCE_CLOSE_MS, logger);
  if (outcome !== 'closed' && outcome !== 'timeout') throw failed(what, outcome.failed);
}

/**
 * The one way every role closes what BullMQ opened: never waits on Redis for good, and says what
 * went wrong. Resolves when the object closed; rejects with a `CloseError` when its close rejected,
 * or when it did not finish in its bound and its connections were dropped (the object is closed
 * either way: nothing of it keeps the process alive).
 */
export async function closeBounded(target: BullmqConnected, bounds: CloseBounds): Promise<void> {
  const graceMs = bounds.graceMs ?? CLOSE_MS;
  const what = bounds.what ?? describe(target);
  if (target instanceof Worker) return closeWorker(target, graceMs, what, bounds.logger, bounds.cancelRunning);
  const outcome = await within(target.close(), graceMs);
  if (outcome === 'timeout') await drop(target, what, graceMs, bounds.logger);
  if (outcome !== 'closed' && outcome !== 'timeout') throw failed(what, outcome.failed);
}

/**
 * `closeBounded` for several objects at once; every one is closed whatever the others do. Rejects
 * with an AggregateError of every CloseError when any close went wrong.
 */
export async function closeAllBounded(targets: readonly BullmqConnected[], bounds: Omit<CloseBounds, 'what'>): Promise<void> {
  const results = await Promise.allSettled(targets.map((t) => closeBounded(t, bounds)));
  const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (errors.length > 0) throw new AggregateError(errors, `${errors.length} of ${targets.length} BullMQ objects did not close cleanly`);
}
