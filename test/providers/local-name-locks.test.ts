import { describe, expect, it } from 'vitest';
import { NameLocks } from '../../src/providers/local/name-locks.ts';

/** A promise settled from outside: the test decides when each piece of work ends. */
function gate(): { promise: Promise<void>; open: () => void; fail: (err: Error) => void } {
  let open!: () => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

describe('NameLocks', () => {
  it('runs the calls on one name one after another, in order, and other names at once', async () => {
    const locks = new NameLocks();
    const order: string[] = [];
    const first = gate();
    const a1 = locks.run('a', async () => {
      order.push('a1 start');
      await first.promise;
      order.push('a1 end');
      return 1;
    });
    const a2 = locks.run('a', () => {
      order.push('a2');
      return Promise.resolve(2);
    });
    const b = locks.run('b', () => {
      order.push('b');
      return Promise.resolve(3);
    });
    expect(await b).toBe(3);
    expect(order).toEqual(['a1 start', 'b']);
    first.open();
    expect(await Promise.all([a1, a2])).toEqual([1, 2]);
    expect(order).toEqual(['a1 start', 'b', 'a1 end', 'a2']);
  });

  it('a call that fails rejects its caller alone: the next call on the name still runs', async () => {
    const locks = new NameLocks();
    const failing = gate();
    const first = locks.run('a', () => failing.promise);
    const second = locks.run('a', () => Promise.resolve('ran'));
    failing.fail(new Error('boom'));
    await expect(first).rejects.toThrow('boom');
    expect(await second).toBe('ran');
  });

  it('forgets a name once nothing is running or queued on it', async () => {
    const locks = new NameLocks();
    const work = gate();
    const running = locks.run('a', () => work.promise);
    expect(locks.size).toBe(1);
    work.open();
    await running;
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(locks.size).toBe(0);
  });
});
