import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { POOL_LABEL, type Pool } from '../../src/model/pool-resource.ts';
import { RedisMemberReplacements } from '../../src/pools/member-replacements.ts';
import type { MemberSummary } from '../../src/pools/member-summary.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { testConfig } from '../support/config.ts';

const pool = (name: string, replicas = 2, extra = '') =>
  `apiVersion: egress-proxies/v1\nkind: ProxyPool\nmetadata: { name: ${name} }\nspec:\n  replicas: ${replicas}\n  template: { spec: { provider: local } }\n${extra}`;

describe('ProxyPools through the API', () => {
  let config: AppConfig;
  let roles: RunningRoles;
  let guarded: RunningRoles;
  let api: string;
  let redis: Redis;
  let proxies: RedisProxyStore;
  let reconcile: Queue;

  beforeAll(async () => {
    config = testConfig({
      providers: [
        { name: 'local', type: 'local' },
        { name: 'other', type: 'local' },
      ],
    });
    roles = await runRoles(config, ['api'], silentLogger());
    guarded = await runRoles(testConfig({ tokens: ['s3cret-token-value'], maxBodyBytes: 2048 }), ['api'], silentLogger());
    api = roles.api?.url ?? '';
    redis = new Redis(inject('redisUrl'));
    proxies = new RedisProxyStore(redis, config.redis.prefix);
    reconcile = new Queue(QUEUES.reconcile, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: config.redis.prefix });
  });
  afterAll(async () => {
    await roles.close();
    await guarded.close();
    await proxies.close();
    await reconcile.close();
    redis.disconnect();
  });

  const post = (path: string, body: string, type = 'application/yaml') => fetch(`${api}${path}`, { method: 'POST', headers: { 'content-type': type }, body });

  test('apply creates, is idempotent, moves the generation only on change; each change asks for the pool reconcile', async () => {
    const created = await post('/v1/pools', `${pool('web')}---\n${pool('api-pool', 3)}`);
    expect(created.status).toBe(200);
    expect(await created.json()).toEqual({
      items: [
        { name: 'web', outcome: 'created', generation: 1 },
        { name: 'api-pool', outcome: 'created', generation: 1 },
      ],
    });
    expect(await (await post('/v1/pools', pool('web'))).json()).toEqual({ items: [{ name: 'web', outcome: 'unchanged', generation: 1 }] });
    const json = JSON.stringify({ kind: 'ProxyPool', metadata: { name: 'web' }, spec: { replicas: 5, template: { spec: { provider: 'local' } } } });
    expect(await (await post('/v1/pools', json, 'application/json')).json()).toEqual({ items: [{ name: 'web', outcome: 'configured', generation: 2 }] });
    const jobs = await reconcile.getJobs(['waiting']);
    expect(
      jobs
        .filter((j) => j.name === 'pool-reconcile')
        .map((j) => (j.data as { pool: string }).pool)
        .sort(),
    ).toEqual(['api-pool', 'web']);

    const list = (await (await fetch(`${api}/v1/pools`)).json()) as { items: Pool[] };
    expect(list.items.map((p) => [p.name, p.spec.replicas, p.spec.maxSurge])).toEqual([
      ['api-pool', 3, 1],
      ['web', 5, 1],
    ]);
  });

  test('a bad set is rejected whole with every error at once, naming documents and fields, unknown providers included', async () => {
    const bad = [
      pool('ok-one'),
      `kind: ProxyPool\nmetadata: { name: Bad_Name }\nspec: { replicas: -1, maxAge: 5s, template: { spec: { provider: local } } }\n`,
      `kind: ProxyPool\nmetadata: { name: sp }\nspec:\n  replicas: 3\n  template: { metadata: { labels: { ${POOL_LABEL}: x } }, spec: {} }\n  spread: [{ provider: nowhere, weight: 1 }, { provider: local, weight: 0 }]\n`,
      `kind: ProxyPool\nmetadata: { name: tp }\nspec: { replicas: 1, template: { spec: { provider: elsewhere } } }\n`,
      `kind: ProxyPool\nmetadata: { name: nt }\nspec: { replicas: 1, template: { spec: {} } }\n`,
      pool('ok-one'),
    ].join('---\n');
    const res = await post('/v1/pools', bad);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; errors: string[] };
    expect(body.error).toBe('ERR_INVALID_POOL');
    expect(body.errors).toEqual([
      expect.stringMatching(/^document 2: metadata\.name: /),
      expect.stringMatching(/^document 2: spec\.replicas: /),
      'document 2: spec.maxAge: expected a duration of at least 10s, such as 30m or 24h, got "5s"',
      expect.stringMatching(/^document 3: spec\.spread\[1\]\.weight: /),
      `document 3: spec.template.metadata.labels.${POOL_LABEL}: is set by the pool itself`,
      // Reported although the schema refused the document: every error at once.
      'document 3: spec.spread[0].provider: "nowhere" is not a configured provider (configured: local, other)',
      'document 4: spec.template.spec.provider: "elsewhere" is not a configured provider (configured: local, other)',
      'document 5: spec.template.spec.provider: required when spec.spread is not given',
      'document 6: metadata.name: "ok-one" appears twice (also document 1)',
    ]);
    expect((await fetch(`${api}/v1/pools/ok-one`)).status).toBe(404);
    const spread = await post('/v1/pools', pool('sp2', 2, '  spread: [{ provider: nowhere, weight: 1 }]\n'));
    expect(await spread.json()).toMatchObject({
      errors: ['spec.spread[0].provider: "nowhere" is not a configured provider (configured: local, other)'],
    });
    // A dry run checks everything and writes nothing; on /v1/proxies too (egress apply checks a mixed file with it).
    const dry = await post('/v1/pools?dryRun=true', pool('dry'));
    expect(await dry.json()).toEqual({ items: [{ name: 'dry', outcome: 'valid' }], dryRun: true });
    expect((await fetch(`${api}/v1/pools/dry`)).status).toBe(404);
    expect((await post('/v1/proxies?dryRun=true', 'kind: Proxy\nmetadata: { name: dry }\nspec: { provider: local }\n')).status).toBe(200);
    expect((await fetch(`${api}/v1/proxies/dry`)).status).toBe(404);
    expect(await (await post('/v1/pools?dryRun=maybe', pool('dry'))).json()).toEqual({
      error: 'ERR_BAD_REQUEST',
      message: 'query parameter "dryRun" must be true or false, got "maybe"',
    });
    expect((await post('/v1/pools', '{', 'application/json')).status).toBe(400);
    expect((await post('/v1/pools', 'key: [unclosed')).status).toBe(400);
  });

  test('GET one pool shows its members (never their credentials); a Proxy carrying the pool label is refused by /v1/proxies', async () => {
    await post('/v1/pools', pool('summ'));
    await proxies.apply({ metadata: { name: 'summ-abcde', labels: { [POOL_LABEL]: 'summ' } }, spec: { provider: 'local' } });
    await proxies.apply({ metadata: { name: 'not-a-member', labels: {} }, spec: { provider: 'local' } });
    const view = (await (await fetch(`${api}/v1/pools/summ`)).json()) as Pool & { members: MemberSummary };
    expect(view.name).toBe('summ');
    expect(view.members).toEqual({
      phases: { Pending: 1 },
      items: [{ name: 'summ-abcde', provider: 'local', phase: 'Pending', createdAt: expect.any(String) }],
    });
    expect(JSON.stringify(view)).not.toMatch(/password|egress-summ/);

    const refused = await post('/v1/proxies', `kind: Proxy\nmetadata: { name: sneaky, labels: { ${POOL_LABEL}: summ } }\nspec: { provider: local }\n`);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({
      error: 'ERR_INVALID_PROXY',
      errors: [`metadata.labels.${POOL_LABEL}: is set only by a ProxyPool on its members; apply a ProxyPool instead`],
    });
  });

  test('rotate asks for every member to be replaced; delete is 202, the pool then refuses applies and rotations (409)', async () => {
    await post('/v1/pools', pool('del'));
    await proxies.apply({ metadata: { name: 'del-aaaaa', labels: { [POOL_LABEL]: 'del' } }, spec: { provider: 'local' } });
    const rotate = await fetch(`${api}/v1/pools/del/rotate`, { method: 'POST' });
    expect(rotate.status).toBe(202);
    expect(await rotate.json()).toEqual({ name: 'del', members: 1, requested: 1 });
    const replacements = new RedisMemberReplacements(redis, config.redis.prefix);
    expect([...(await replacements.list('del')).entries()]).toEqual([
      ['del-aaaaa', { reason: 'rotation requested by anonymous', requestedAt: expect.any(String) }],
    ]);

    const deleted = await fetch(`${api}/v1/pools/del`, { method: 'DELETE' });
    expect(deleted.status).toBe(202);
    expect(((await deleted.json()) as Pool).metadata.deletionRequestedAt).toEqual(expect.any(String));
    const again = await post('/v1/pools', pool('del'));
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ error: 'ERR_POOL_TERMINATING' });
    const both = await post('/v1/pools', `${pool('fresh')}---\n${pool('del')}`);
    expect(both.status).toBe(409);
    expect((await fetch(`${api}/v1/pools/fresh`)).status).toBe(404);
    expect((await fetch(`${api}/v1/pools/del/rotate`, { method: 'POST' })).status).toBe(409);
    expect((await fetch(`${api}/v1/pools/nope`, { method: 'DELETE' })).status).toBe(404);
    expect((await fetch(`${api}/v1/pools/nope/rotate`, { method: 'POST' })).status).toBe(404);
  });

  test('the same auth and body limits as /v1/proxies', async () => {
    const base = guarded.api?.url ?? '';
    for (const [method, path] of [
      ['GET', '/v1/pools'],
      ['GET', '/v1/pools/x'],
      ['POST', '/v1/pools'],
      ['DELETE', '/v1/pools/x'],
      ['POST', '/v1/pools/x/rotate'],
    ] as const) {
      const res = await fetch(`${base}${path}`, { method, ...(method === 'POST' ? { headers: { 'content-type': 'application/yaml' }, body: pool('x') } : {}) });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    const auth = { authorization: 'Bearer s3cret-token-value' };
    const big = await fetch(`${base}/v1/pools`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/yaml' },
      body: pool('big', 1, `# ${'x'.repeat(4096)}\n`),
    });
    expect(big.status).toBe(413);
    const form = await fetch(`${base}/v1/pools`, { method: 'POST', headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' }, body: 'a=b' });
    expect(form.status).toBe(415);
    expect((await fetch(`${base}/v1/pools`, { headers: auth })).status).toBe(200);
  });
});
