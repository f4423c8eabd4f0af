/**
 * The last survivors of the mutation run that a behaviour decides (docs/testing.md#mutation-testing):
 * a password file with a line break before the password, deletes as many as the budget leaves room
 * for at the pace, and an ASCII host name kept exactly as sent.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { buildServerConfig, SERVER_FLAG_DEFAULTS } from '../../src/cli/server-config.ts';
import { silentLogger } from '../../src/logging.ts';
import { parseDomain } from '../../src/pools/session-id.ts';
import type { Instance, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { sweepProvider } from '../../src/proxies/gc.ts';
import { tempDir } from '../support/temp-dirs.ts';

describe('last survivors', () => {
  test('a password file holding a line break before the password (and none after) is refused', async () => {
    const file = join(await tempDir('last-survivors-'), 'password');
    await writeFile(file, '\nsecret');
    await expect(
      buildServerConfig({ ...SERVER_FLAG_DEFAULTS, redisUrl: 'redis://r', redisPasswordFile: file }, { defaultProviders: false, servesApi: false }),
    ).rejects.toThrow(`--redis-password-file: ${file} must hold the password on one line`);
  });

  test('at one delete a second with 2.99 s of budget, three deletes start and the rest are left', async () => {
    const listed: Instance[] = ['a', 'b', 'c', 'd', 'e'].map((p) => ({
      name: `ep-${p}`,
      id: p,
      state: 'running',
      owner: { fleet: 'f', proxy: p },
      createdAt: '2000-01-01T00:00:00.000Z',
    }));
    const life: ProxyLifecycle = {
      ensureInstance: () => Promise.reject(new Error('not used')),
      getInstance: () => Promise.reject(new Error('not used')),
      deleteInstance: async () => undefined,
      async *listInstances() {
        yield* listed;
      },
    };
    const proxies = { list: async () => [], get: async () => undefined, getMany: async () => [] };
    const result = await sweepProvider(
      'gcp',
      life,
      { proxies, fleet: 'f', graceMs: 0, logger: silentLogger(), now: () => new Date('2026-12-01T00:00:00Z'), deletesPerSecond: 1, deleteBudgetMs: 2990 },
      new AbortController().signal,
    );
    expect(result).toMatchObject({ deleted: [{ name: 'ep-a' }, { name: 'ep-b' }, { name: 'ep-c' }], left: 2 });
  });

  test('an ASCII host name is kept exactly as sent, even a label IDNA would not decode (blocks are per exact host)', () => {
    expect(parseDomain('xn--zz.example')).toBe('xn--zz.example');
  });
});
