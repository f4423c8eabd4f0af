import type { Job, Queue } from 'bullmq';
import { EgressError, NotFoundError } from '../errors.ts';

export const JOB_STATES = ['active', 'waiting', 'delayed', 'prioritized', 'completed', 'failed', 'waiting-children'] as const;
export type JobState = (typeof JOB_STATES)[number];

/** A job as the API and `egress jobs` show it. */
export interface JobView {
  queue: string;
  id: string;
  name: string;
  state: string;
  attemptsMade: number;
  data: unknown;
  failedReason?: string;
  createdAt: string;
  processedAt?: string;
  finishedAt?: string;
}

export class AmbiguousJobError extends EgressError {
  constructor(id: string, queues: string[]) {
    super('ERR_JOB_AMBIGUOUS', `job id "${id}" exists in several queues (${queues.join(', ')}): name one with ?queue=`);
  }
}

export class JobNotRetryableError extends EgressError {
  constructor(id: string, state: string) {
    super('ERR_JOB_NOT_FAILED', `job "${id}" is ${state}; only failed jobs can be retried`);
  }
}

function iso(ms: number | undefined): string | undefined {
  return ms ? new Date(ms).toISOString() : undefined;
}

async function view(queue: Queue, job: Job, state?: string): Promise<JobView> {
  return {
    queue: queue.name,
    id: job.id ?? '',
    name: job.name,
    state: state ?? (await job.getState()),
    attemptsMade: job.attemptsMade,
    data: job.data as unknown,
    failedReason: job.failedReason || undefined,
    createdAt: new Date(job.timestamp).toISOString(),
    processedAt: iso(job.processedOn),
    finishedAt: iso(job.finishedOn),
  };
}

/** Job inspection and retry over a set of queues, for the API. */
export class JobInspector {
  readonly #queues: ReadonlyMap<string, Queue>;

  constructor(queues: readonly Queue[]) {
    this.#queues = new Map(queues.map((q) => [q.name, q]));
  }

  queueNames(): string[] {
    return [...this.#queues.keys()];
  }

  #select(queue: string | undefined): Queue[] {
    if (queue === undefined) return [...this.#queues.values()];
    const q = this.#queues.get(queue);
    if (!q) throw new NotFoundError('queue', queue);
    return [q];
  }

  async list(states: readonly JobState[], queue?: string, limit = 100): Promise<JobView[]> {
    const out: JobView[] = [];
    for (const q of this.#select(queue)) {
      for (const state of states) {
        const jobs = await q.getJobs([state], 0, limit - 1, false);
        for (const job of jobs) out.push(await view(q, job, state));
      }
    }
    return out.sort((a, b) => b.createdAt.localeCompare(a.createdAt)).slice(0, limit);
  }

  async #find(id: string, queue?: string): Promise<{ queue: Queue; job: Job }> {
    const found: { queue: Queue; job: Job }[] = [];
    for (const q of this.#select(queue)) {
      const job = await q.getJob(id);
      if (job) found.push({ queue: q, job });
    }
    const [first, ...rest] = found;
    if (!first) throw new NotFoundError('job', id);
    if (rest.length > 0)
      throw new AmbiguousJobError(
        id,
        found.map((f) => f.queue.name),
      );
    return first;
  }

  /** Moves one failed job back to waiting. */
  async retry(id: string, queue?: string): Promise<JobView> {
    const { queue: q, job } = await this.#find(id, queue);
    const state = await job.getState();
    if (state !== 'failed') throw new JobNotRetryableError(id, state);
    await job.retry('failed');
    return view(q, job);
  }

  /** Moves every failed job of the selected queues back to waiting; returns how many per queue. */
  async retryAllFailed(queue?: string): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const q of this.#select(queue)) {
      const failed = await q.getJobCountByTypes('failed');
      if (failed > 0) await q.retryJobs({ state: 'failed', count: 1000 });
      counts[q.name] = failed;
    }
    return counts;
  }
}
