import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { AppConfig } from '../../src/config/app.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { silentLogger } from '../../src/logging.ts';
import { RedisStatusStore } from '../../src/store/redis-status-store.ts';
import { ROOT, runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';

// Nobody listens here: a command that reached for the API would fail with exit 1 and
// ERR_API_UNREACHABLE instead of the usage error (exit 2) these tests expect.
const NO_API = ['--api-url', 'http://127.0.0.1:1'];

describe('usage', () => {
  test('--version prints the package version to stdout and exits 0', async () => {
    const { version } = JSON.parse(await readFile(resolve(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      expect(await runCli([flag])).toEqual({ code: 0, out: `${version}\n`, err: '' });
    }
  });

  test('--help prints to stdout and exits 0', async () => {
    const run = await runCli(['--help']);
    expect(run.code).toBe(0);
    expect(run.out).toMatch(/^Usage: egress /);
    expect(run.err).toBe('');
  });

  test.each([
    [[], /^Usage: egress \[options\] \[command\]\n/],
    [['get'], /^Usage: egress get \[options\] \[command\]\n/],
  ])('%j without a command prints the usage to stderr and exits 2', async (args, usage) => {
    const run = await runCli(args);
    expect(run.code).toBe(2);
    expect(run.out).toBe('');
    expect(run.err).toMatch(usage);
  });

  test('an unknown resource type lists the known ones', async () => {
    for (const type of ['pods', 'providers']) {
      expect(await runCli(['get', type, ...NO_API])).toEqual({
        code: 2,
        out: '',
        err: `error: get: unknown resource type "${type}" (known: providerhealth (ph), proxies (proxy), pools (pool))\n`,
      });
    }
  });

  test('jobs --state is checked before the API is asked, naming the flag and the known states', async () => {
    const known = 'active, waiting, delayed, prioritized, completed, failed, waiting-children';
    const cases: [string, string][] = [
      ['bogus', `error: --state: unknown state "bogus" (known: ${known})\n`],
      ['failed,nope,worse,nope', `error: --state: unknown states "nope", "worse" (known: ${known})\n`],
      ['', `error: --state: unknown state "" (known: ${known})\n`],
    ];
    for (const [state, err] of cases) {
      expect(await runCli(['jobs', '--state', state, ...NO_API])).toEqual({ code: 2, out: '', err });
    }
    // A known state gets as far as the (absent) API.
    const known1 = await runCli(['jobs', '--state', 'failed,waiting-children', ...NO_API]);
    expect(known1.code).toBe(1);
    expect(known1.err).toContain('ERR_API_UNREACHABLE');
  });
});

function health(name: string): ProviderHealth {
  const now = new Date().toISOString();
  return {
    name,
    status: {
      ready: true,
      lastTransitionTime: now,
      lastCheckTime: now,
      targets: [
        { name: 'localhost', ready: true, reason: 'Ok', message: 'fine', lastTransitionTime: now, lastCheckTime: now, durationSeconds: 0.001, details: {} },
      ],
    },
  };
}

describe('get -o json|yaml: a list is always {items}, one named object is bare', () => {
  let config: AppConfig;
  let roles: RunningRoles;
  let api: string[];
  let redis: Redis;
  let store: RedisStatusStore;

  beforeAll(async () => {
    config = testConfig({
      providers: [
        { name: 'local', type: 'local' },
        { name: 'other', type: 'local' },
      ],
    });
    roles = await runRoles(config, ['api'], silentLogger());
    api = ['--api-url', roles.api?.url ?? ''];
    redis = new Redis(inject('redisUrl'));
    store = new RedisStatusStore(redis, config.redis.prefix);
  });
  afterAll(async () => {
    await roles.close();
    await store.close();
    redis.disconnect();
  });

  const json = async (args: string[]): Promise<unknown> => {
    const run = await runCli([...args, '-o', 'json', ...api]);
    expect(run.code, run.err).toBe(0);
    return JSON.parse(run.out);
  };
  const yaml = async (args: string[]): Promise<unknown> => {
    const run = await runCli([...args, '-o', 'yaml', ...api]);
    expect(run.code, run.err).toBe(0);
    return parseYaml(run.out);
  };

  test('providerhealth with none, one and two providers, and by name', async () => {
    expect(await json(['get', 'ph'])).toEqual({ items: [] });
    const local = health('local');
    await store.updateProviderHealth('local', () => local);
    // One provider is still a list.
    expect(await json(['get', 'ph'])).toEqual({ items: [local] });
    expect(await yaml(['get', 'providerhealth'])).toMatchObject({ items: [{ name: 'local' }] });
    await store.updateProviderHealth('other', () => health('other'));
    const two = (await json(['get', 'ph'])) as { items: ProviderHealth[] };
    expect(two.items.map((h) => h.name).sort()).toEqual(['local', 'other']);
    // A name gives the bare object.
    expect(await json(['get', 'ph', 'local'])).toEqual(local);
    expect(await yaml(['get', 'ph', 'local'])).toMatchObject({ name: 'local', status: { ready: true } });
  });

  test('proxies with none and one, and by name', async () => {
    expect(await json(['get', 'proxies'])).toEqual({ items: [] });
    const post = await fetch(`${roles.api?.url ?? ''}/v1/proxies`, {
      method: 'POST',
      headers: { 'content-type': 'application/yaml' },
      body: 'metadata: { name: only-one }\nspec: { provider: local }\n',
    });
    expect(post.status).toBe(200);
    const one = (await json(['get', 'proxies'])) as { items: { name: string }[] };
    expect(one.items.map((p) => p.name)).toEqual(['only-one']);
    expect(await yaml(['get', 'proxy'])).toMatchObject({ items: [{ name: 'only-one' }] });
    expect(await json(['get', 'proxy', 'only-one'])).toMatchObject({ name: 'only-one', spec: { provider: 'local' } });
  });

  test('jobs is a list too', async () => {
    expect(await json(['jobs', '--state', 'failed'])).toEqual({ items: [] });
    // The apply above asked for one reconcile: one job is still a list.
    expect(await yaml(['jobs', '--state', 'waiting'])).toMatchObject({ items: [{ queue: 'reconcile', data: { proxy: 'only-one' } }] });
  });
});
