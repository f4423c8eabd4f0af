/**
 * The resolver the traffic metric and collector place instances with: one listing of the proxy
 * store names every instance (the reconcile's instanceNameFor), kept for a while, read again when
 * stale, and kept when a new listing fails.
 */
import { describe, expect, it } from 'vitest';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { instanceNameFor } from '../../src/proxies/instance-name.ts';
import { createProxyResolver } from '../../src/proxies/proxy-resolver.ts';
import { proxy } from '../support/reconcile-plan-view.ts';

const FLEET = 'traffic-fleet';

function member(name: string, pool?: string): Proxy {
  const p = proxy({ name, metadata: { uid: `uid-${name}` } });
  return { ...p, labels: pool ? { 'egress-proxies.io/pool': pool } : {} };
}

describe('the proxy resolver', () => {
  it('places an instance by its proxy and pool, lists at most once per refresh, and keeps the last listing when one fails', async () => {
    let listed: Proxy[] = [member('blue-1', 'blue'), member('lone')];
    let failing = false;
    let lists = 0;
    const resolve = createProxyResolver({
      reader: {
        list: () => {
          lists++;
          return failing ? Promise.reject(new Error('store down')) : Promise.resolve(listed);
        },
      },
      fleet: FLEET,
      refreshMs: 60_000,
    });
    const blue = instanceNameFor(FLEET, member('blue-1', 'blue'));
    expect(await resolve(blue)).toEqual({ proxy: 'blue-1', pool: 'blue' });
    expect(await resolve(instanceNameFor(FLEET, member('lone')))).toEqual({ proxy: 'lone' });
    expect(await resolve('ep-unknown-00000000')).toBeUndefined();
    // Another fleet's instance of the same proxy is not ours.
    expect(await resolve(instanceNameFor('other-fleet', member('blue-1', 'blue')))).toBeUndefined();
    expect(lists).toBe(1);

    // Stale at once: the next call lists again; a failing listing keeps what it knew.
    const stale = createProxyResolver({
      reader: {
        list: () => {
          lists++;
          return failing ? Promise.reject(new Error('store down')) : Promise.resolve(listed);
        },
      },
      fleet: FLEET,
      refreshMs: 0,
    });
    expect(await stale(blue)).toEqual({ proxy: 'blue-1', pool: 'blue' });
    failing = true;
    expect(await stale(blue)).toEqual({ proxy: 'blue-1', pool: 'blue' });
    failing = false;
    listed = [member('blue-1', 'green')];
    expect(await stale(blue)).toEqual({ proxy: 'blue-1', pool: 'green' });
    expect(lists).toBe(4);
  });
});
