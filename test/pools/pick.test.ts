import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { uniquePrefix } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';
import { pickConfig, PoolFixture } from './pick-support.ts';

const TOKEN = 'pick-token-0123456789abcdef';

interface PickBody {
  pool: string;
  proxy: string;
  proxyUrl: string;
  outcome: 'kept' | 'new' | 'moved';
  session?: string;
  sessionTtlSeconds?: number;
  domain?: string;
  feedbackUrl: string;
}

describe('picks from a pool', () => {
  const prefix = uniquePrefix();
  let roles: RunningRoles;
  let other: RunningRoles;
  let api: string;
  let fixture: PoolFixture;

  const get = (path: string, base = api): Promise<Response> => fetch(base + path, { headers: { authorization: `Bearer ${TOKEN}` } });
  const pick = async (query: string, base = api): Promise<PickBody> => {
    const res = await get(`/v1/pools/web/pick?${query}`, base);
    expect(res.status, await res.clone().text()).toBe(200);
    return (await res.json()) as PickBody;
  };
  const feedback = (proxy: string, body: unknown): Promise<Response> =>
    fetch(`${api}/v1/proxies/${proxy}/feedback`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    const config = pickConfig({ prefix, tokens: [TOKEN], queues: ['checks'] }, { sessionTtlMs: 60_000 });
    roles = await runRoles(config, ['api'], silentLogger());
    // A second API replica on the same Redis: sessions and round-robin are shared.
    other = await runRoles(config, ['api'], silentLogger());
    api = roles.api?.url ?? '';
    fixture = new PoolFixture(prefix);
    await fixture.pool('web', 3);
    for (const [i, name] of ['web-aaaaa', 'web-bbbbb', 'web-ccccc'].entries()) await fixture.member('web', name, `http://127.0.0.1:${4101 + i}`);
    await fixture.pool('empty', 1);
    await fixture.member('empty', 'empty-aaaaa', undefined);
    await fixture.member(undefined, 'loner', 'http://127.0.0.1:4200');
  });
  afterAll(async () => {
    await other.close();
    await roles.close();
    await fixture.close();
  });

  test('without a session: round-robin among the least recently picked, with credentials in the URL', async () => {
    const names: string[] = [];
    for (let i = 0; i < 6; i++) names.push((await pick('')).proxy);
    expect(new Set(names.slice(0, 3)).size).toBe(3);
    expect(names.slice(3)).toEqual(names.slice(0, 3));
    const one = await pick('');
    expect(one.proxyUrl).toMatch(new RegExp(`^http://egress-${one.proxy}:[^@]+@127\\.0\\.0\\.1:41\\d\\d$`));
    expect(one.feedbackUrl).toBe(`/v1/proxies/${one.proxy}/feedback`);
    expect(one.outcome).toBe('new');
    const text = await get('/v1/pools/web/pick?format=text');
    expect(text.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(text.headers.get('cache-control')).toBe('no-store');
    expect(await text.text()).toMatch(/^http:\/\/egress-web-[a-z]{5}:[^@]+@127\.0\.0\.1:41\d\d\n$/);
  });

  test('HEAD answers whether a pick would find a member, without consuming one', async () => {
    const head = (path: string): Promise<Response> => fetch(api + path, { method: 'HEAD', headers: { authorization: `Bearer ${TOKEN}` } });
    const first = (await pick('')).proxy;
    for (let i = 0; i < 2; i++) expect((await head('/v1/pools/web/pick')).status).toBe(200);
    // Three members in round-robin: had the two HEADs picked, the next pick would be `first` again.
    const next = [(await pick('')).proxy, (await pick('')).proxy, (await pick('')).proxy];
    expect(new Set([first, next[0], next[1]]).size).toBe(3);
    expect(next[2]).toBe(first);
    const none = await head('/v1/pools/empty/pick?session=s1');
    expect(none.status).toBe(503);
    expect(none.headers.get('retry-after')).toBe('1');
    expect((await head('/v1/pools/nowhere/pick')).status).toBe(404);
    expect((await head('/v1/pools/web/pick?format=xml')).status).toBe(400);
  });

  test('a session keeps its member, on either API replica, until the member leaves Ready', async () => {
    const first = await pick('session=crawler_1');
    expect(first).toMatchObject({ outcome: 'new', session: 'crawler_1', sessionTtlSeconds: 60 });
    for (const base of [api, other.api?.url ?? '', api]) expect(await pick('session=crawler_1', base)).toMatchObject({ proxy: first.proxy, outcome: 'kept' });
    await fixture.unready(first.proxy);
    try {
      const moved = await pick('session=crawler_1');
      expect(moved.outcome).toBe('moved');
      expect(moved.proxy).not.toBe(first.proxy);
      expect(await pick('session=crawler_1', other.api?.url)).toMatchObject({ proxy: moved.proxy, outcome: 'kept' });
    } finally {
      await fixture.ready(first.proxy, `http://127.0.0.1:${4101 + ['web-aaaaa', 'web-bbbbb', 'web-ccccc'].indexOf(first.proxy)}`);
    }
  });

  test('a member that joins is in the next round of the round robin; one that leaves is never handed out', async () => {
    await fixture.member('web', 'web-ddddd', 'http://127.0.0.1:4104');
    try {
      const round: string[] = [];
      for (let i = 0; i < 4; i++) round.push((await pick('')).proxy);
      expect(round.sort()).toEqual(['web-aaaaa', 'web-bbbbb', 'web-ccccc', 'web-ddddd']);
      await fixture.unready('web-ddddd');
      for (let i = 0; i < 4; i++) expect((await pick('')).proxy).not.toBe('web-ddddd');
    } finally {
      await fixture.proxies.requestDeletion('web-ddddd');
    }
  });

  test('concurrent first picks of one session on two replicas all get the same member', async () => {
    const bases = [api, other.api?.url ?? ''];
    const picks = await Promise.all(Array.from({ length: 24 }, (_, i) => pick('session=race-1', bases[i % 2])));
    expect(new Set(picks.map((p) => p.proxy)).size).toBe(1);
    expect(picks.filter((p) => p.outcome === 'new')).toHaveLength(1);
  });

  test('blocked for a domain: that domain’s picks move the session, other domains keep it; all blocked is a 503 saying so', async () => {
    const first = await pick('session=s-block&domain=Shop.Example.COM.');
    expect(first.domain).toBe('shop.example.com');
    const res = await feedback(first.proxy, { outcome: 'blocked', domain: 'shop.example.com' });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      proxy: first.proxy,
      pool: 'web',
      outcome: 'blocked',
      domain: 'shop.example.com',
      blockedDomains: 1,
      replacement: 'below-threshold',
    });
    expect(await pick('session=s-block&domain=news.example.org')).toMatchObject({ proxy: first.proxy, outcome: 'kept' });
    const moved = await pick('session=s-block&domain=shop.example.com');
    expect(moved).toMatchObject({ outcome: 'moved' });
    expect(moved.proxy).not.toBe(first.proxy);
    // Without a domain nothing is blocked: the session stays where it moved.
    expect(await pick('session=s-block')).toMatchObject({ proxy: moved.proxy, outcome: 'kept' });
    // Round-robin for the domain never hands out the blocked member.
    for (let i = 0; i < 4; i++) expect((await pick('domain=shop.example.com')).proxy).not.toBe(first.proxy);

    for (const name of ['web-aaaaa', 'web-bbbbb', 'web-ccccc']) await feedback(name, { outcome: 'captcha', domain: 'all.example.net' });
    const none = await get('/v1/pools/web/pick?session=s-block&domain=all.example.net');
    expect(none.status).toBe(503);
    expect(none.headers.get('retry-after')).toBe('1');
    expect(await none.json()).toMatchObject({
      error: 'ERR_POOL_NO_MEMBER',
      reason: 'all-blocked',
      message: expect.stringContaining('blocked for all.example.net'),
    });
  });

  test('404 for an unknown pool or one being deleted; 503 none-ready for a pool without Ready members', async () => {
    expect((await get('/v1/pools/nope/pick')).status).toBe(404);
    const empty = await get('/v1/pools/empty/pick');
    expect(empty.status).toBe(503);
    expect(await empty.json()).toMatchObject({ reason: 'none-ready', message: 'pool "empty" has no Ready member' });
    await fixture.pool('going', 1);
    await fixture.member('going', 'going-aaaaa', 'http://127.0.0.1:4300');
    expect((await get('/v1/pools/going/pick')).status).toBe(200);
    await fixture.pools.requestDeletion('going');
    const gone = await get('/v1/pools/going/pick');
    expect(gone.status).toBe(404);
    expect(await gone.json()).toEqual({ error: 'ERR_NOT_FOUND', message: 'pool "going" not found' });
  });

  test.each([
    ['session=', 'session: must not be empty'],
    [`session=${'s'.repeat(129)}`, 'session: expected at most 128 characters, got 129'],
    ['session=a%20b', 'session: expected letters, digits and _ . ~ : - only'],
    ['session=a/b', 'session: expected letters, digits and _ . ~ : - only'],
    ['session=a&session=b', 'query parameter "session" may be given once, got 2'],
    ['domain=', 'domain: must not be empty'],
    ['domain=exa_mple.com', 'domain: expected a host name such as example.com, got "exa_mple.com"'],
    ['domain=-bad.com', 'domain: expected a host name such as example.com, got "-bad.com"'],
    ['domain=a..b', 'domain: expected a host name such as example.com, got "a..b"'],
    [`domain=${'a'.repeat(64)}.com`, `domain: expected a host name such as example.com, got "${'a'.repeat(64)}.com"`],
    [`domain=${'a.'.repeat(130)}com`, 'domain: expected a host name of at most 253 characters, got 263'],
    ['domain=http://example.com/', 'domain: expected a host name such as example.com, got "http://example.com/"'],
    ['format=xml', 'query parameter "format" must be json or text, got "xml"'],
  ])('400 for %s', async (query, message) => {
    const res = await get(`/v1/pools/web/pick?${query}`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'ERR_BAD_REQUEST', message });
  });

  test('an international domain is kept in its ASCII form', async () => {
    expect((await pick('domain=B%C3%BCcher.example')).domain).toBe('xn--bcher-kva.example');
  });

  test('picks are counted per pool and result', async () => {
    const metrics = await (await get('/metrics')).text();
    expect(metrics).toMatch(/proxy_operator_pool_picks_total\{pool="web",result="kept"\} [1-9]/);
    expect(metrics).toMatch(/proxy_operator_pool_picks_total\{pool="web",result="moved"\} [1-9]/);
    expect(metrics).toMatch(/proxy_operator_pool_picks_total\{pool="web",result="all-blocked"\} [1-9]/);
    expect(metrics).toMatch(/proxy_operator_pool_picks_total\{pool="empty",result="none-ready"\} [1-9]/);
    expect(metrics).not.toContain('pool="nope"');
  });

  test('the pool counts its live sessions: each session once however often it picks; picks without one add none', async () => {
    await fixture.pool('counted', 2);
    for (const [i, name] of ['counted-aaaaa', 'counted-bbbbb'].entries()) await fixture.member('counted', name, `http://127.0.0.1:${4301 + i}`);
    const live = async (pool: string): Promise<unknown> => await (await get(`/v1/pools/${pool}/sessions`)).json();
    expect(await live('counted')).toEqual({ pool: 'counted', live: 0 });
    for (const session of ['s1', 's2', 's1']) expect((await get(`/v1/pools/counted/pick?session=${session}`)).status).toBe(200);
    expect((await get('/v1/pools/counted/pick', other.api?.url)).status).toBe(200);
    expect(await live('counted')).toEqual({ pool: 'counted', live: 2 });
    const unknown = await get('/v1/pools/nope/sessions');
    expect(unknown.status).toBe(404);
    expect((await fetch(`${api}/v1/pools/counted/sessions`)).status).toBe(401);
  });

  test('picks need a token, like discovery', async () => {
    expect((await fetch(`${api}/v1/pools/web/pick`)).status).toBe(401);
    expect((await fetch(`${api}/v1/pools/web/pick`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
  });
});

describe('live sessions expire with the session TTL', () => {
  const prefix = uniquePrefix();
  let roles: RunningRoles;
  let fixture: PoolFixture;

  beforeAll(async () => {
    roles = await runRoles(pickConfig({ prefix, tokens: [TOKEN], queues: ['checks'] }, { sessionTtlMs: 300 }), ['api'], silentLogger());
    fixture = new PoolFixture(prefix);
    await fixture.pool('brief', 1);
    await fixture.member('brief', 'brief-aaaaa', 'http://127.0.0.1:4401');
  });
  afterAll(async () => {
    await roles.close();
    await fixture.close();
  });

  test('a session not picked again within the TTL is no longer counted', async () => {
    const get = (path: string): Promise<Response> => fetch((roles.api?.url ?? '') + path, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect((await get('/v1/pools/brief/pick?session=once')).status).toBe(200);
    // That a picked session is counted is the test above; here the count must come back to 0 by itself.
    await waitFor('the session to expire', async () => {
      const { live } = (await (await get('/v1/pools/brief/sessions')).json()) as { live: number };
      return live === 0;
    });
  });
});
