import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { spawnEgress, waitUpAndLocalReady } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { startTlsRedis, type TlsRedisPeer } from '../support/redis-peers.ts';

/**
 * Managed Redis speaks TLS: a redis-server with only a TLS port, its certificate signed by a CA
 * generated for the test, reached as `rediss://` with that CA given by REDIS_CA_FILE.
 */
describe('egress up against rediss:// with --redis-ca-file', () => {
  let redis: TlsRedisPeer;
  let dir: string;

  beforeAll(async () => {
    redis = await startTlsRedis();
    dir = await mkdtemp(join(tmpdir(), 'egress-up-tls-'));
  }, 60_000);
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await redis?.stop();
  });

  test('the CA from REDIS_CA_FILE verifies the server: a check is published over TLS', async () => {
    const dataDir = join(dir, 'data');
    const up = spawnEgress(['up', '--port', '0', '--data-dir', dataDir, '--prefix', uniquePrefix()], { REDIS_URL: redis.url, REDIS_CA_FILE: redis.caFile });
    try {
      const { ph } = await waitUpAndLocalReady(up);
      expect(ph.status.targets[0]?.reason).toBe('Ok');
      expect(up.logs()).not.toContain('started a private redis-server');
      expect(up.logs()).not.toContain(redis.password);
      await expect(stat(join(dataDir, 'redis'))).rejects.toThrow(/ENOENT/);
    } finally {
      expect(await up.stop()).toBe(0);
    }
  }, 90_000);

  test('a server whose certificate the given CA did not sign is refused, and said so', async () => {
    const api = spawnEgress(['api', '--port', '0', '--data-dir', join(dir, 'api-data'), '--prefix', uniquePrefix(), '--redis-ca-file', redis.otherCaFile], {
      REDIS_URL: redis.url,
    });
    try {
      await api.waitForLog('redis connection error');
      const line =
        api
          .logs()
          .split('\n')
          .find((l) => l.includes('redis connection error')) ?? '';
      expect(JSON.parse(line)).toMatchObject({
        err: 'self-signed certificate in certificate chain',
        hint: 'the Redis server’s TLS certificate is not trusted: give the CA that signed it with --redis-ca-file (REDIS_CA_FILE)',
      });
      expect(api.logs()).not.toContain(redis.password);
    } finally {
      await api.stop();
    }
  }, 60_000);
});
