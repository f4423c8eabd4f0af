/**
 * The server flags declared once (src/cli/server-flags.ts): an absent flag takes its default from
 * SERVER_FLAG_DEFAULTS through the schema alone, mistakes are reported in a fixed order (the
 * provider-check pair first, then each flag alone, then the rules between flags, then the files),
 * and a combination of flags that is refused is refused before the file it names is read.
 */
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { buildServerConfig, SERVER_FLAG_DEFAULTS } from '../../src/cli/server-config.ts';
import { tempDir } from '../support/temp-dirs.ts';

const WORKER = { defaultProviders: false, servesApi: false };
const API = { defaultProviders: false, servesApi: true };

async function refusal(flags: Parameters<typeof buildServerConfig>[0], options = WORKER): Promise<string> {
  return buildServerConfig(flags, options).then(
    () => 'accepted',
    (err: Error) => err.message,
  );
}

describe('server flags', () => {
  test('no flags at all build the same configuration as every default given', async () => {
    for (const options of [WORKER, API]) {
      expect(await buildServerConfig({}, options)).toEqual(await buildServerConfig({ ...SERVER_FLAG_DEFAULTS }, options));
    }
  });

  test('the provider-check pair is reported before any other flag, and each flag alone before the rules between flags', async () => {
    expect(await refusal({ port: 'x', providerCheckInterval: '5s' })).toBe('--provider-check-interval: must be 0 (off) or at least 10s, got 5s');
    expect(await refusal({ port: 'x', concurrency: '0' })).toBe('--port: expected an integer from 0 to 65535, got "x"');
    expect(await refusal({ auth: false, host: '0.0.0.0', concurrency: '0' }, API)).toBe('--concurrency: expected an integer from 1 to 1000, got "0"');
  });

  test('a refused combination is reported without reading the file it names', async () => {
    const missing = join(await tempDir('egress-server-flags-'), 'absent');
    expect(await refusal({ redisCaFile: missing })).toBe(
      '--redis-ca-file: applies to --redis-url (rediss://) or --redis-cluster-nodes; the private redis-server speaks plain TCP on loopback',
    );
    expect(await refusal({ redisPasswordFile: missing, redisUrl: 'redis://:pw@127.0.0.1:1' })).toBe(
      '--redis-password-file: REDIS_URL already carries a password: give it in one place',
    );
    expect(await refusal({ auth: false, apiTokenFile: missing }, API)).toBe('--no-auth: contradicts --api-token-file: give one of them');
    // Given alone, the same file is read, and its absence named.
    expect(await refusal({ redisCaFile: missing, redisUrl: 'rediss://127.0.0.1:1' })).toMatch(/^--redis-ca-file: cannot read .*absent: ENOENT/);
  });

  test('the probe rule quotes both flags as typed', async () => {
    expect(await refusal({ probeInterval: '3000ms' })).toBe(
      '--probe-timeout: must be at most half of --probe-interval (3000ms): a probe has two steps under it, got "2s"',
    );
    const ok = await buildServerConfig({ probeInterval: '4s', probeTimeout: '2000ms' }, WORKER);
    expect(ok.readiness).toMatchObject({ intervalMs: 4000, timeoutMs: 2000 });
  });

  test('a value of the wrong type is refused in the project’s wording, naming the flag', async () => {
    expect(await refusal({ port: 8080 as unknown as string })).toBe('--port: expected a string, got 8080');
  });
});
