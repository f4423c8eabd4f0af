/**
 * The console over plain HTTP (no browser): its files and their caching, sign-in and the session
 * cookie, the CSRF header and Origin checks, ETags, and 4xx for bad input. The browser suite
 * (console-browser.test.ts) drives the page itself.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { ConsoleSessions } from '../../src/console/sessions.ts';
import { CounterHistory } from '../../src/console/counter-history.ts';
import type { ConsoleCounters } from '../../src/console/counters.ts';
import { testConfig } from '../support/config.ts';
import { rawRequest } from '../support/raw-http.ts';

const TOKEN = 'console-http-token-0123456789abcdef';
const doc = (name: string): string => `kind: Proxy\nmetadata:\n  name: ${name}\nspec:\n  provider: local\n`;

describe('the console over HTTP, API with tokens', () => {
  let roles: RunningRoles;
  let api: string;

  /** Signs in; the session's cookie header and CSRF token. */
  const signIn = async (token = TOKEN): Promise<{ cookie: string; csrf: string }> => {
    const res = await fetch(`${api}/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
    expect(res.status).toBe(200);
    const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const html = await (await fetch(`${api}/console`, { headers: { cookie } })).text();
    const csrf = /name="egress-csrf" content="([^"]+)"/.exec(html)?.[1] ?? '';
    return { cookie, csrf };
  };

  beforeAll(async () => {
    const base = testConfig({ tokens: [TOKEN] });
    roles = await runRoles(freezeConfig({ ...base, api: { ...base.api, tokenNames: ['ops'] } }), ['api'], silentLogger());
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles.close();
  });

  test('the page’s files: content types, a content-hashed URL cached for good, gzip when asked, 404 for anything else', async () => {
    const html = await (await fetch(`${api}/console/sign-in`)).text();
    const script = /<script type="module" src="([^"]+)"/.exec(html)?.[1] ?? '';
    const style = /<link rel="stylesheet" href="([^"]+)"/.exec(html)?.[1] ?? '';
    expect(script).toMatch(/^\/console\/assets\/app\.[\w-]{16}\.js$/);
    expect(html).not.toMatch(/<script>|<style>|style=/);
    const js = await fetch(`${api}${script}`, { headers: { 'accept-encoding': 'identity' } });
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(js.headers.get('content-security-policy')).toContain("default-src 'self'");
    const css = await fetch(`${api}${style}`);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    const gz = await fetch(`${api}${script}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    expect(Number(gz.headers.get('content-length'))).toBeLessThan(250 * 1024);
    expect((await fetch(`${api}/console/assets/app.0000000000000000.js`)).status).toBe(404);
    expect((await fetch(`${api}/console/nothing-here`)).status).toBe(404);
    const slash = await fetch(`${api}/console/`, { redirect: 'manual' });
    expect([slash.status, slash.headers.get('location')]).toEqual([302, '/console']);
  });

  test('sign-in: a wrong token is 401, bad bodies 400, a token file’s `name:token` line is accepted', async () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${api}/console/session`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    expect((await post(JSON.stringify({ token: 'wrong' }))).status).toBe(401);
    expect((await post('{"token":')).status).toBe(400);
    expect((await post(JSON.stringify({ token: 42 }))).status).toBe(400);
    expect((await post(JSON.stringify({ token: 'x'.repeat(5000) }))).status).toBe(400);
    expect((await post(JSON.stringify({ token: TOKEN }), { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await post(JSON.stringify({ token: TOKEN }), { origin: 'https://evil.example' })).status).toBe(403);
    const line = await post(JSON.stringify({ token: `ops:${TOKEN}\n` }));
    expect(line.status).toBe(200);
    expect(await line.json()).toEqual({ caller: 'ops' });
    const cookie = line.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^egress_console=[\w-]{43}; Max-Age=43200; Path=\/console; HttpOnly; SameSite=Strict$/);
    expect(cookie).not.toContain(TOKEN);
    const behindTls = await post(JSON.stringify({ token: TOKEN }), { 'x-forwarded-proto': 'https' });
    expect(behindTls.headers.get('set-cookie')).toMatch(/; Secure/);
  });

  test('a session’s API calls need its CSRF header; they run as its caller, with ETags', async () => {
    const { cookie, csrf } = await signIn();
    expect(csrf).toMatch(/^[\w-]{43}$/);
    expect((await fetch(`${api}/console/v1/proxies`, { headers: { cookie } })).status).toBe(403);
    expect((await fetch(`${api}/console/v1/proxies`, { headers: { 'x-egress-csrf': csrf } })).status).toBe(401);
    const headers = { cookie, 'x-egress-csrf': csrf };
    const applied = await fetch(`${api}/console/v1/proxies`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/yaml' },
      body: doc('via-console'),
    });
    expect(applied.status).toBe(200);
    const listed = await fetch(`${api}/console/v1/proxies`, { headers });
    const etag = listed.headers.get('etag') ?? '';
    expect(await listed.json()).toMatchObject({ items: [{ name: 'via-console' }] });
    expect((await fetch(`${api}/console/v1/proxies`, { headers: { ...headers, 'if-none-match': etag } })).status).toBe(304);
    expect((await fetch(`${api}/console/v1/proxies?format=text`, { headers })).status).toBe(400);
    const events = (await (await fetch(`${api}/console/v1/events?reason=Applied`, { headers })).json()) as { items: { message: string }[] };
    expect(events.items.map((e) => e.message).join('\n')).toMatch(/by ops/);
    // What the API refuses, it refuses through the console too, as a 4xx.
    expect((await fetch(`${api}/console/v1/proxies/%ZZ`, { headers })).status).toBeLessThan(500);
    expect((await fetch(`${api}/console/v1/events?limit=0`, { headers })).status).toBe(400);
    expect((await fetch(`${api}/console/v1/nothing`, { headers })).status).toBe(404);
    // Nothing but /v1 through the console, however the path is spelled.
    for (const path of ['/console/v1/../admin/queues/api/queues', '/console/v1/%2e%2e/admin/queues/api/queues', '/console/v1/..%2fmetrics']) {
      const res = await rawRequest(`${api}${path}`, { headers });
      expect([path, res.status]).toEqual([path, 404]);
    }
    // The counters, and sign-out.
    const counters = (await (await fetch(`${api}/console/counters`, { headers })).json()) as { everyMs: number; samples: Record<string, number>[] };
    expect(counters.everyMs).toBe(10_000);
    expect(counters.samples.length).toBeGreaterThanOrEqual(2);
    expect(Object.keys(counters.samples[0] ?? {}).sort()).toEqual(['at', 'bans', 'denials', 'picks', 'probeFailures']);
    expect((await fetch(`${api}/console/sign-out`, { method: 'POST', headers })).status).toBe(204);
    expect((await fetch(`${api}/console/v1/proxies`, { headers })).status).toBe(401);
  });
});

describe('console sessions', () => {
  test('a session ends at its lifetime, and the oldest makes room past the cap', () => {
    let now = 1_000;
    const sessions = new ConsoleSessions({ ttlMs: 100, maxSessions: 2, now: () => now });
    const a = sessions.create('a');
    expect(sessions.get(a.id)).toMatchObject({ caller: 'a' });
    now += 100;
    expect(sessions.get(a.id)).toBeUndefined();
    const b = sessions.create('b');
    const c = sessions.create('c');
    const d = sessions.create('d');
    expect([sessions.get(b.id), sessions.get(c.id)?.caller, sessions.get(d.id)?.caller]).toEqual([undefined, 'c', 'd']);
    expect(sessions.get('not an id')).toBeUndefined();
    expect(sessions.csrfMatches(d.session, d.session.csrf)).toBe(true);
    expect(sessions.csrfMatches(d.session, c.session.csrf)).toBe(false);
    expect(sessions.csrfMatches(d.session, undefined)).toBe(false);
    sessions.delete(d.id);
    expect(sessions.get(d.id)).toBeUndefined();
  });
});

describe('the counters’ history', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test('samples on a timer from the first ask, keeps the newest, and stops once nobody asks', async () => {
    vi.useFakeTimers();
    let picks = 0;
    const read = (): Promise<ConsoleCounters> => Promise.resolve({ at: Date.now(), picks: picks++, denials: 0, bans: 0, probeFailures: 0 });
    const history = new CounterHistory(read, { everyMs: 1000, keep: 3, idleMs: 5000 });
    expect(history.sampling).toBe(false);
    expect((await history.history()).map((s) => s.picks)).toEqual([0, 1]);
    await vi.advanceTimersByTimeAsync(3000);
    expect((await history.history()).map((s) => s.picks)).toEqual([2, 3, 4, 5]);
    await vi.advanceTimersByTimeAsync(7000);
    expect(history.sampling).toBe(false);
    history.stop();
  });
});
