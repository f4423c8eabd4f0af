import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { EgressEvent } from '../../src/events/event-sink.ts';
import { silentLogger } from '../../src/logging.ts';
import { RedisMemberReplacements } from '../../src/pools/member-replacements.ts';
import { uniquePrefix } from '../support/config.ts';
import { pickConfig, PoolFixture } from './pick-support.ts';

const TOKEN = 'crawler:feedback-token-0123456789';
const SECRET = 'feedback-token-0123456789';

function post(base: string, path: string, body: string, headers: Record<string, string> = {}, token = SECRET): Promise<Response> {
  return fetch(base + path, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body });
}

describe('ban feedback', () => {
  const prefix = uniquePrefix();
  let roles: RunningRoles;
  let api: string;
  let fixture: PoolFixture;
  let reconcile: Queue;

  const report = (proxy: string, outcome: string, domain: string): Promise<Response> =>
    post(api, `/v1/proxies/${proxy}/feedback`, JSON.stringify({ outcome, domain }));
  const pick = async (query: string): Promise<{ proxy: string; outcome: string }> => {
    const res = await fetch(`${api}/v1/pools/web/pick?${query}`, { headers: { authorization: `Bearer ${SECRET}` } });
    expect(res.status).toBe(200);
    return (await res.json()) as { proxy: string; outcome: string };
  };
  const events = async (reason: string): Promise<EgressEvent[]> =>
    ((await (await fetch(`${api}/v1/events?reason=${reason}`, { headers: { authorization: `Bearer ${SECRET}` } })).json()) as { items: EgressEvent[] }).items;

  beforeAll(async () => {
    // The token file's `name:token` form: events and the rate limit know the caller as "crawler".
    const config = pickConfig({ prefix, tokens: [SECRET], queues: ['checks'] }, { replaceDomains: 2, feedbackBurst: 1000 });
    roles = await runRoles({ ...config, api: { ...config.api, tokenNames: [TOKEN.split(':')[0] ?? ''] } }, ['api'], silentLogger());
    api = roles.api?.url ?? '';
    fixture = new PoolFixture(prefix);
    await fixture.pool('web', 2);
    await fixture.member('web', 'web-aaaaa', 'http://127.0.0.1:4101');
    await fixture.member('web', 'web-bbbbb', 'http://127.0.0.1:4102');
    await fixture.member(undefined, 'loner', 'http://127.0.0.1:4200');
    reconcile = new Queue('reconcile', { connection: redisOptions(inject('redisUrl'), 'producer'), prefix });
  });
  afterAll(async () => {
    await reconcile.close();
    await roles.close();
    await fixture.close();
  });

  test('blocked on N distinct domains within the window: the pool is asked, once, to replace the member', async () => {
    const first = await report('web-aaaaa', 'blocked', 'a.example.com');
    expect(await first.json()).toMatchObject({ blockedDomains: 1, replacement: 'below-threshold', blockedUntil: expect.any(String) });
    // The same domain again is still one domain.
    expect(await (await report('web-aaaaa', 'blocked', 'A.example.com')).json()).toMatchObject({ blockedDomains: 1, replacement: 'below-threshold' });
    const second = await report('web-aaaaa', 'captcha', 'b.example.com');
    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ proxy: 'web-aaaaa', pool: 'web', outcome: 'captcha', blockedDomains: 2, replacement: 'requested' });
    expect(await (await report('web-aaaaa', 'blocked', 'c.example.com')).json()).toMatchObject({ blockedDomains: 3, replacement: 'already-requested' });

    const asked = await new RedisMemberReplacements(fixture.redis, prefix).list('web');
    expect([...asked.keys()]).toEqual(['web-aaaaa']);
    expect(asked.get('web-aaaaa')?.reason).toBe('blocked on 2 domains within 10m');
    const jobId = await reconcile.getDeduplicationJobId('pool-reconcile-web');
    const job = jobId ? await reconcile.getJob(jobId) : undefined;
    expect(job).toMatchObject({ name: 'pool-reconcile', data: { pool: 'web' } });

    const blocked = await events('Blocked');
    // One event per block that started (a.example.com twice is one), by the caller's token name.
    expect(blocked.filter((e) => e.object.name === 'web-aaaaa').map((e) => e.details?.domain)).toEqual(['a.example.com', 'b.example.com', 'c.example.com']);
    expect(blocked[0]).toMatchObject({ type: 'Warning', provider: 'local', details: { by: 'crawler', pool: 'web', outcome: 'blocked' } });
    const replaced = await events('ReplacementRequested');
    expect(replaced).toHaveLength(1);
    expect(replaced[0]).toMatchObject({ object: { kind: 'Proxy', name: 'web-aaaaa' }, details: { pool: 'web', by: 'crawler' } });
    expect(JSON.stringify([...blocked, ...replaced])).not.toContain(SECRET);

    const metrics = await (await fetch(`${api}/metrics`, { headers: { authorization: `Bearer ${SECRET}` } })).text();
    expect(metrics).toContain('proxy_operator_pool_feedback_total{pool="web",outcome="blocked"} 3');
    expect(metrics).toContain('proxy_operator_pool_feedback_total{pool="web",outcome="captcha"} 1');
    expect(metrics).toContain('proxy_operator_pool_ban_replacements_total{pool="web"} 1');
  });

  test('ok clears nothing: a block ends only with its cool-down', async () => {
    await report('web-bbbbb', 'blocked', 'ok.example.com');
    const ok = await report('web-bbbbb', 'ok', 'ok.example.com');
    expect(await ok.json()).toMatchObject({ outcome: 'ok', blockedDomains: 1, replacement: 'below-threshold' });
    expect(ok.status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await pick('domain=ok.example.com')).proxy).toBe('web-aaaaa');
  });

  test('through the pool with the session: no proxy name needed, and the session lets go of the member', async () => {
    const held = await pick('session=s9&domain=d.example.com');
    const res = await post(api, '/v1/pools/web/feedback', JSON.stringify({ outcome: 'blocked', domain: 'd.example.com', session: 's9' }));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ proxy: held.proxy, pool: 'web', domain: 'd.example.com' });
    const next = await pick('session=s9');
    expect(next.proxy).not.toBe(held.proxy);
    const unknown = await post(api, '/v1/pools/web/feedback', JSON.stringify({ outcome: 'blocked', domain: 'd.example.com', session: 'never-picked' }));
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ message: 'session (expired, or never picked) of pool "web" "never-picked" not found' });
    expect((await post(api, '/v1/pools/nope/feedback', JSON.stringify({ outcome: 'ok', domain: 'd.example.com', session: 's9' }))).status).toBe(404);
  });

  test('a proxy outside any pool: counted and recorded, nothing to exclude or replace; an unknown proxy is a 404', async () => {
    for (const domain of ['x.example', 'y.example', 'z.example']) expect((await report('loner', 'blocked', domain)).status).toBe(200);
    expect(await (await report('loner', 'blocked', 'w.example')).json()).toEqual({
      proxy: 'loner',
      outcome: 'blocked',
      domain: 'w.example',
      blockedDomains: 4,
      replacement: 'not-in-pool',
    });
    expect((await events('Blocked')).find((e) => e.object.name === 'loner')?.message).toBe(
      'blocked on x.example, reported by crawler; outside any pool: nothing is excluded or replaced',
    );
    const metrics = await (await fetch(`${api}/metrics`, { headers: { authorization: `Bearer ${SECRET}` } })).text();
    expect(metrics).toContain('proxy_operator_pool_feedback_total{pool="",outcome="blocked"} 4');
    const missing = await report('nobody', 'blocked', 'x.example');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: 'ERR_NOT_FOUND', message: 'proxy "nobody" not found' });
  });

  test.each([
    ['{"outcome":"banned","domain":"a.com"}', 400, 'outcome: expected one of blocked, captcha, ok, got "banned"'],
    ['{"outcome":"blocked"}', 400, 'domain: required'],
    ['{"domain":"a.com"}', 400, 'outcome: expected one of blocked, captcha, ok, got nothing'],
    ['{"outcome":"blocked","domain":"a.com","extra":1}', 400, 'unknown key "extra"'],
    ['{"outcome":"blocked","domain":"not a host"}', 400, 'domain: expected a host name such as example.com, got "not a host"'],
    ['{"outcome":"blocked","domain":7}', 400, 'domain: expected a string, got 7'],
    ['{"outcome":"blocked",', 400, 'the body is not valid JSON'],
    ['[]', 400, 'expected an object'],
    ['null', 400, 'expected an object, got null'],
    [JSON.stringify({ outcome: 'blocked', domain: 'a'.repeat(2000) }), 413, 'a feedback body is at most 1024 bytes'],
  ])('proxy feedback %s → %i', async (body, status, message) => {
    const res = await post(api, '/v1/proxies/web-aaaaa/feedback', body);
    expect(res.status).toBe(status);
    const json = (await res.json()) as { message: string };
    expect(json.message).toContain(message);
  });

  test.each([
    ['{"outcome":"blocked","domain":"a.com"}', 400, 'session: '],
    ['{"outcome":"blocked","domain":"a.com","session":"a b"}', 400, 'session: expected letters, digits and _ . ~ : - only'],
    [`{"outcome":"blocked","domain":"a.com","session":"${'s'.repeat(200)}"}`, 400, 'session: '],
  ])('pool feedback %s → %i', async (body, status, message) => {
    const res = await post(api, '/v1/pools/web/feedback', body);
    expect(res.status).toBe(status);
    expect(((await res.json()) as { message: string }).message).toContain(message);
  });

  test('strict JSON: YAML or a form is 415, and a token is required', async () => {
    const yaml = await post(api, '/v1/proxies/web-aaaaa/feedback', 'outcome: blocked\ndomain: a.com\n', { 'content-type': 'application/yaml' });
    expect(yaml.status).toBe(415);
    const form = await post(api, '/v1/proxies/web-aaaaa/feedback', 'outcome=blocked', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.status).toBe(415);
    const anonymous = await fetch(`${api}/v1/proxies/web-aaaaa/feedback`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"outcome":"ok","domain":"a.com"}',
    });
    expect(anonymous.status).toBe(401);
  });
});

describe('feedback rate limit', () => {
  const prefix = uniquePrefix();
  const A = 'rate-token-a-0123456789';
  const B = 'rate-token-b-0123456789';
  let roles: RunningRoles;
  let replica: RunningRoles;
  let fixture: PoolFixture;

  beforeAll(async () => {
    const config = pickConfig({ prefix, tokens: [A, B], queues: ['checks'] }, { feedbackRate: 0.01, feedbackBurst: 3 });
    roles = await runRoles(config, ['api'], silentLogger());
    replica = await runRoles(config, ['api'], silentLogger());
    fixture = new PoolFixture(prefix);
    await fixture.member(undefined, 'loner', 'http://127.0.0.1:4200');
  });
  afterAll(async () => {
    await replica.close();
    await roles.close();
    await fixture.close();
  });

  test('per token, shared by the API replicas: the burst, then 429 with Retry-After, whatever the body', async () => {
    const bases = [roles.api?.url ?? '', replica.api?.url ?? '', roles.api?.url ?? ''];
    for (const base of bases) expect((await post(base, '/v1/proxies/loner/feedback', '{"outcome":"ok","domain":"a.com"}', {}, A)).status).toBe(200);
    for (const body of ['{"outcome":"ok","domain":"a.com"}', 'not json']) {
      const limited = await post(bases[1] ?? '', '/v1/proxies/loner/feedback', body, {}, A);
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBe('100');
      expect(await limited.json()).toMatchObject({ error: 'ERR_RATE_LIMITED' });
    }
    // Another token has its own bucket.
    expect((await post(bases[0] ?? '', '/v1/proxies/loner/feedback', '{"outcome":"ok","domain":"a.com"}', {}, B)).status).toBe(200);
  });
});
