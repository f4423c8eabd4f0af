import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { uniquePrefix } from '../support/config.ts';
import { pickConfig, PoolFixture } from './pick-support.ts';

const TOKEN = 'tier-token-0123456789abcdef';

/** Pool `mix`: two datacenter members, one residential, one without a tier; escalation datacenter → residential → mobile. */
describe('picks and feedback by tier', () => {
  const prefix = uniquePrefix();
  let roles: RunningRoles;
  let api: string;
  let fixture: PoolFixture;

  const call = (path: string, init: RequestInit = {}): Promise<Response> =>
    fetch(api + path, { ...init, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...init.headers } });
  const pick = async (query: string): Promise<{ proxy: string; outcome: string; tier?: string }> => {
    const res = await call(`/v1/pools/mix/pick?${query}`);
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as { proxy: string; outcome: string; tier?: string };
  };
  const report = async (path: string, body: Record<string, string>): Promise<Record<string, unknown>> => {
    const res = await call(path, { method: 'POST', body: JSON.stringify(body) });
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as Record<string, unknown>;
  };

  beforeAll(async () => {
    const config = pickConfig({ prefix, tokens: [TOKEN], queues: ['checks'] }, { sessionTtlMs: 60_000, feedbackBurst: 1000 });
    roles = await runRoles(config, ['api'], silentLogger());
    api = roles.api?.url ?? '';
    fixture = new PoolFixture(prefix);
    await fixture.pools.apply({
      kind: 'ProxyPool',
      metadata: { name: 'mix', labels: {} },
      spec: {
        replicas: 4,
        template: { metadata: { labels: {} }, spec: {} },
        spread: [
          { provider: 'local', weight: 1, labels: { tier: 'datacenter' } },
          { provider: 'vendor-a', weight: 1, labels: { tier: 'residential' } },
        ],
        tiers: ['datacenter', 'residential', 'mobile'],
        maxSurge: 1,
      },
    });
    await fixture.member('mix', 'mix-dc001', 'http://127.0.0.1:4301', { tier: 'datacenter' });
    await fixture.member('mix', 'mix-dc002', 'http://127.0.0.1:4302', { tier: 'datacenter' });
    await fixture.member('mix', 'mix-res01', 'http://127.0.0.1:4303', { tier: 'residential' });
    await fixture.member('mix', 'mix-plain', 'http://127.0.0.1:4304');
  });
  afterAll(async () => {
    await roles.close();
    await fixture.close();
  });

  test('a pick with a tier hands out only members of that tier; without one, every member', async () => {
    const dc = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const p = await pick('tier=datacenter');
      expect(p.tier).toBe('datacenter');
      dc.add(p.proxy);
    }
    expect([...dc].sort()).toEqual(['mix-dc001', 'mix-dc002']);
    expect(await pick('tier=residential')).toMatchObject({ proxy: 'mix-res01', tier: 'residential' });
    const all = new Set<string>();
    for (let i = 0; i < 8; i++) all.add((await pick('')).proxy);
    expect([...all].sort()).toEqual(['mix-dc001', 'mix-dc002', 'mix-plain', 'mix-res01']);
  });

  test('a session escalated to another tier moves to a member of it, then keeps it', async () => {
    const first = await pick('session=s1&tier=datacenter');
    expect(first).toMatchObject({ outcome: 'new', tier: 'datacenter' });
    expect(await pick('session=s1&tier=datacenter')).toMatchObject({ proxy: first.proxy, outcome: 'kept' });
    expect(await pick('session=s1&tier=residential')).toMatchObject({ proxy: 'mix-res01', outcome: 'moved' });
    expect(await pick('session=s1&tier=residential')).toMatchObject({ proxy: 'mix-res01', outcome: 'kept' });
    // Without a tier the session keeps whatever member it holds.
    expect(await pick('session=s1')).toMatchObject({ proxy: 'mix-res01', outcome: 'kept' });
  });

  test('a tier no Ready member carries: 503 none-in-tier with Retry-After; HEAD says the same; a malformed tier: 400', async () => {
    const none = await call('/v1/pools/mix/pick?tier=mobile');
    expect(none.status).toBe(503);
    expect(none.headers.get('retry-after')).toBe('1');
    expect(await none.json()).toMatchObject({
      error: 'ERR_POOL_NO_MEMBER',
      reason: 'none-in-tier',
      message: 'pool "mix" has no Ready member of tier "mobile" (Ready members are of tier datacenter, residential)',
    });
    expect((await call('/v1/pools/mix/pick?tier=mobile', { method: 'HEAD' })).status).toBe(503);
    expect((await call('/v1/pools/mix/pick?tier=residential', { method: 'HEAD' })).status).toBe(200);
    for (const bad of ['', 'no%20spaces', '-dash', 'x'.repeat(64)]) {
      const res = await call(`/v1/pools/mix/pick?tier=${bad}`);
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(/^tier: /);
    }
    expect((await call('/v1/pools/mix/pick?tier=a&tier=b')).status).toBe(400);
    const metrics = await (await call('/metrics')).text();
    expect(metrics).toMatch(/proxy_operator_pool_picks_total\{pool="mix",result="none-in-tier"\} [1-9]/);
  });

  test('every member of the tier blocked for the domain: 503 all-blocked naming the tier', async () => {
    await report('/v1/proxies/mix-res01/feedback', { outcome: 'blocked', domain: 'only-res.example' });
    const res = await call('/v1/pools/mix/pick?tier=residential&domain=only-res.example');
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ reason: 'all-blocked', message: expect.stringContaining('member of tier "residential" of pool "mix"') });
    expect((await pick('tier=datacenter&domain=only-res.example')).tier).toBe('datacenter');
  });

  test("ban feedback names the next tier in the pool's order; none after the last, for ok, or for a member without a tier", async () => {
    const dc = await report('/v1/proxies/mix-dc001/feedback', { outcome: 'blocked', domain: 'shop.example' });
    expect(dc).toMatchObject({ proxy: 'mix-dc001', pool: 'mix', nextTier: 'residential' });
    const held = await pick('session=s2&tier=residential');
    const viaPool = await report('/v1/pools/mix/feedback', { outcome: 'captcha', domain: 'shop.example', session: 's2' });
    expect(viaPool).toMatchObject({ proxy: held.proxy, nextTier: 'mobile' });
    expect(await report('/v1/proxies/mix-dc002/feedback', { outcome: 'ok', domain: 'shop.example' })).not.toHaveProperty('nextTier');
    expect(await report('/v1/proxies/mix-plain/feedback', { outcome: 'blocked', domain: 'shop.example' })).not.toHaveProperty('nextTier');
  });
});
