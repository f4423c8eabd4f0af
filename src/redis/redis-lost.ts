import { EgressError } from '../errors.ts';
import { formatDuration } from '../schema/duration.ts';
import type { RedisClient } from './connections.ts';

/**
 * Redis is gone for this process (`ERR_REDIS_LOST`): the private redis-server exited under the
 * roles, or the configured Redis could not be reached for longer than `--redis-lost-after`.
 * Nothing of the process can go on; its supervisor (systemd, Kubernetes) restarts it.
 */
export class RedisLostError extends EgressError {
  constructor(message: string, cause?: unknown) {
    super('ERR_REDIS_LOST', message, { retryable: false, ...(cause === undefined ? {} : { cause }) });
  }
}

/** The private redis-server of `egress up` exited while the roles used it. */
export function privateRedisLost(pid: number, how: string): RedisLostError {
  return new RedisLostError(`the private redis-server (pid ${pid}) ${how} while the roles used it`);
}

export interface OutageWatchOptions {
  /** How long Redis may stay unreachable before the process gives up on it; 0 waits for ever. */
  limitMs: number;
  /** Where Redis is, for the message (never with a password). */
  where: string;
  /** Called once, when the outage has lasted `limitMs`. */
  onLost: (err: RedisLostError) => void;
}

/** Stops watching (the process is closing, or the connection is being closed on purpose). */
export type StopWatching = () => void;

/**
 * The retry budget of a Redis connection. ioredis (and BullMQ over it) reconnect for ever, which
 * keeps a process alive but useless when its Redis is gone for good. This watches one connection
 * of the process (the others share its Redis): from the moment it is not ready — closed,
 * reconnecting, or never connected yet — a clock runs, stopped by the next `ready`; when the clock
 * reaches `limitMs`, `onLost` is told, with the last connection error as the cause.
 */
export function watchRedisOutage(redis: RedisClient, options: OutageWatchOptions): StopWatching {
  if (options.limitMs <= 0) return () => undefined;
  let timer: NodeJS.Timeout | undefined;
  let lastError: Error | undefined;
  let done = false;
  const lost = (): void => {
    timer = undefined;
    if (done) return;
    done = true;
    stop();
    const why = lastError ? `: ${lastError.message}` : '';
    options.onLost(
      new RedisLostError(`Redis at ${options.where} could not be reached for ${formatDuration(options.limitMs)} (--redis-lost-after)${why}`, lastError),
    );
  };
  const down = (): void => {
    // The outage started at the first sign; later ones (each reconnect attempt) do not restart it.
    timer ??= setTimeout(lost, options.limitMs).unref();
  };
  const up = (): void => {
    clearTimeout(timer);
    timer = undefined;
    lastError = undefined;
  };
  const failed = (err: Error): void => {
    lastError = err;
    down();
  };
  redis.on('ready', up);
  redis.on('close', down);
  redis.on('reconnecting', down);
  redis.on('end', down);
  redis.on('error', failed);
  const stop = (): void => {
    clearTimeout(timer);
    timer = undefined;
    redis.off('ready', up);
    redis.off('close', down);
    redis.off('reconnecting', down);
    redis.off('end', down);
    redis.off('error', failed);
  };
  if (redis.status !== 'ready') down();
  return () => {
    done = true;
    stop();
  };
}
