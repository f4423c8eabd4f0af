import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { INTENT_FILE, instanceDir } from '../../src/providers/local/instance-files.ts';
import { createLocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { sweepProvider, type GcReason } from '../../src/proxies/gc.ts';
import { instanceNameFor } from '../../src/proxies/instance-name.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { uniquePrefix } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';

// The sweep's rules on the local provider's real instances (forward-proxy processes):
// only this fleet's instances are seen, owned ones are kept, young orphans are kept, old
// orphans are deleted and counted with their reason.
describe('garbage collection', () => {
  let redis: Redis;
  let store: RedisProxyStore;
  let lifecycle: ProxyLifecycle;
  const fleet = 'gc-test';
  const signal = AbortSignal.timeout(60_000);
  const credentials = { username: 'u', password: 'p-0123456789abcdef' };

  let dataDir: string;
  const i = (name: string): string => name.split('-')[2] ?? '';
  const sorted = (names: string[]): string[] => [...names].sort();

  beforeAll(async () => {
    redis = new Redis(inject('redisUrl'));
    store = new RedisProxyStore(redis, uniquePrefix());
    dataDir = await tempDir('egress-gc-');
    lifecycle = createLocalLifecycle({ dataDir, logger: silentLogger() });
  });
  afterAll(async () => {
    for (const fl of [fleet, 'someone-else'])
      for await (const i of lifecycle.listInstances(fl, signal))
        await lifecycle.deleteInstance(i.name, i.placement, { owner: i.owner, nameIsOurs: true }, signal);
    await store.close();
    redis.disconnect();
  });

  test('deletes old instances no proxy owns, keeps owned, young and foreign ones', async () => {
    const { proxy } = await store.apply({ metadata: { name: 'kept', labels: {} }, spec: { provider: 'local' } });
    const ownedName = instanceNameFor(fleet, proxy);
    await lifecycle.ensureInstance({ name: ownedName, owner: { fleet, proxy: 'kept' }, credentials }, signal);
    await lifecycle.ensureInstance({ name: 'ep-ghost-00000000', owner: { fleet, proxy: 'ghost' }, credentials }, signal);
    // The proxy exists but this instance is not the one it derives (a recreated proxy's old instance).
    await lifecycle.ensureInstance({ name: 'ep-kept-old00000', owner: { fleet, proxy: 'kept' }, credentials }, signal);
    // Another installation's instance in the same place: never ours to see.
    await lifecycle.ensureInstance({ name: 'theirs', owner: { fleet: 'someone-else', proxy: 'ghost' }, credentials }, signal);

    const deletions: [string, GcReason][] = [];
    const deps = { proxies: store, fleet, graceMs: 10 * 60_000, logger: silentLogger(), onDelete: (p: string, r: GcReason) => deletions.push([p, r]) };
    const young = await sweepProvider('local', lifecycle, deps, signal);
    expect(young).toMatchObject({ seen: 3, kept: 1, young: 2, deleted: [] });

    const later = await sweepProvider('local', lifecycle, { ...deps, now: () => new Date(Date.now() + 3_600_000) }, signal);
    expect(later.seen).toBe(3);
    expect(later.kept).toBe(1);
    expect(later.deleted.sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: 'ep-ghost-00000000', reason: 'no-proxy' },
      { name: 'ep-kept-old00000', reason: 'superseded' },
    ]);
    expect(deletions.sort()).toEqual([
      ['local', 'no-proxy'],
      ['local', 'superseded'],
    ]);
    expect(await lifecycle.getInstance('ep-ghost-00000000', undefined, signal)).toBeUndefined();
    expect((await lifecycle.getInstance(ownedName, undefined, signal))?.state).toBe('running');
    expect((await lifecycle.getInstance('theirs', undefined, signal))?.state).toBe('running');
  });

  test('a state file that cannot be read fails the sweep with nothing deleted; paced deletes once it is readable', async () => {
    const names = Array.from({ length: 8 }, (_, i) => `ep-leak-${i}-00000000`);
    await Promise.all(names.map((name) => lifecycle.ensureInstance({ name, owner: { fleet, proxy: `leak-${i(name)}` }, credentials }, signal)));
    const broken = instanceDir(dataDir, 'ep-broken-00000000');
    await mkdir(broken, { recursive: true });
    await writeFile(join(broken, INTENT_FILE), '{"name": "ep-broken-0');
    const deps = { proxies: store, fleet, graceMs: 10 * 60_000, logger: silentLogger(), now: () => new Date(Date.now() + 3_600_000), deletesPerSecond: 20 };
    await expect(sweepProvider('local', lifecycle, deps, signal)).rejects.toThrow(SyntaxError);
    for (const name of names) expect((await lifecycle.getInstance(name, undefined, signal))?.state).toBe('running');

    await rm(broken, { recursive: true });
    const result = await sweepProvider('local', lifecycle, deps, signal);
    expect(sorted(result.deleted.map((d) => d.name))).toEqual(names);
    for (const name of names) expect(await lifecycle.getInstance(name, undefined, signal)).toBeUndefined();
  });
});
