/**
 * The retry budget of a Redis connection (src/redis/redis-lost.ts), driven by the events ioredis
 * emits (`ready`, `close`, `reconnecting`, `end`, `error`) on a stand-in connection and a fake
 * clock: the outage is timed from its first sign, a `ready` forgives it, the budget is told once.
 */
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import type { RedisClient } from '../../src/redis/connections.ts';
import { watchRedisOutage, type RedisLostError } from '../../src/redis/redis-lost.ts';

class StandInConnection extends EventEmitter {
  status = 'ready';
}

function watch(conn: StandInConnection, limitMs: number): { lost: RedisLostError[]; stop: () => void } {
  const lost: RedisLostError[] = [];
  const stop = watchRedisOutage(conn as unknown as RedisClient, { limitMs, where: '127.0.0.1:6390', onLost: (err) => void lost.push(err) });
  return { lost, stop };
}

describe('watchRedisOutage', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  test('an outage longer than the budget is told once, with the last connection error as its cause', () => {
    const conn = new StandInConnection();
    const { lost } = watch(conn, 1000);
    conn.emit('close');
    conn.emit('error', new Error('connect ECONNREFUSED 127.0.0.1:6390'));
    vi.advanceTimersByTime(999);
    expect(lost).toHaveLength(0);
    // Each reconnect attempt is another sign of the same outage: it does not restart the clock.
    conn.emit('reconnecting');
    vi.advanceTimersByTime(1);
    expect(lost).toHaveLength(1);
    expect(lost[0]?.message).toBe('Redis at 127.0.0.1:6390 could not be reached for 1s (--redis-lost-after): connect ECONNREFUSED 127.0.0.1:6390');
    expect(lost[0]?.code).toBe('ERR_REDIS_LOST');
    expect(lost[0]?.cause).toBeInstanceOf(Error);
    conn.emit('close');
    vi.advanceTimersByTime(10_000);
    expect(lost).toHaveLength(1);
  });

  test('Redis back within the budget is forgiven, and the next outage gets the whole budget again', () => {
    const conn = new StandInConnection();
    const { lost } = watch(conn, 1000);
    conn.emit('close');
    vi.advanceTimersByTime(900);
    conn.emit('ready');
    vi.advanceTimersByTime(5000);
    expect(lost).toHaveLength(0);
    conn.emit('end');
    vi.advanceTimersByTime(900);
    expect(lost).toHaveLength(0);
    vi.advanceTimersByTime(100);
    expect(lost).toHaveLength(1);
    expect(lost[0]?.message).toBe('Redis at 127.0.0.1:6390 could not be reached for 1s (--redis-lost-after)');
  });

  test('a connection not ready when the watch starts is already on the clock', () => {
    const conn = new StandInConnection();
    conn.status = 'connecting';
    const { lost } = watch(conn, 500);
    vi.advanceTimersByTime(500);
    expect(lost).toHaveLength(1);
  });

  test('a budget of 0 waits for ever, and a stopped watch tells nothing and leaves no listener', () => {
    const conn = new StandInConnection();
    const forever = watch(conn, 0);
    conn.emit('close');
    vi.advanceTimersByTime(24 * 3_600_000);
    expect(forever.lost).toHaveLength(0);
    const stopped = watch(conn, 1000);
    conn.emit('close');
    stopped.stop();
    vi.advanceTimersByTime(5000);
    expect(stopped.lost).toHaveLength(0);
    expect(conn.listenerCount('close') + conn.listenerCount('ready') + conn.listenerCount('error')).toBe(0);
  });
});
