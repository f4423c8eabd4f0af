/**
 * Events recorded by the real roles in one process (API, worker, publisher, scheduler) on the
 * run's Redis, with the local provider's real proxy processes: a proxy's apply → instance created
 * → started → Ready; its process killed → NotReady → a new instance → Ready; an orphaned instance
 * garbage-collected with its age; a check reason flip; leadership; deletion. Then the API's
 * filters and `since`, the CLI's table, `--watch` and `describe`, and that no event carries a
 * token or a proxy's password.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig, type AppConfig } from '../../src/config/app.ts';
import type { EgressEvent } from '../../src/events/event-sink.ts';
import { RedisEventStore } from '../../src/events/redis-event-store.ts';
import type { TargetResult } from '../../src/health/types.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { createProvider, type ProviderFactory } from '../../src/providers/create-provider.ts';
import { testConfig } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';

const CI_TOKEN = 'ci-token-0123456789abcdef';
const PLAIN_TOKEN = 'plain-token-fedcba9876543210';

/** The `flaky` provider's check says what this says (a health-only provider: it hosts no proxies). */
let flakyReason: 'Ok' | 'Timeout' = 'Ok';
const factory: ProviderFactory = (config, deps) =>
  config.name !== 'flaky'
    ? createProvider(config, deps)
    : {
        name: 'flaky',
        type: 'local',
        targets: () => ['edge'],
        check: (): Promise<TargetResult[]> =>
          Promise.resolve([
            {
              target: 'edge',
              ready: flakyReason === 'Ok',
              reason: flakyReason,
              message: flakyReason === 'Ok' ? 'fine' : 'no answer within 2s',
              details: {},
              durationSeconds: 0.01,
            },
          ]),
        close: () => Promise.resolve(),
      };

let config: AppConfig;
let roles: RunningRoles;
let api: string;
const passwords: string[] = [];

function call(path: string, init: RequestInit = {}, token = CI_TOKEN): Promise<Response> {
  return fetch(`${api}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...(init.headers ?? {}) } });
}

async function events(query = ''): Promise<EgressEvent[]> {
  const res = await call(`/v1/events${query ? `?${query}` : ''}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: EgressEvent[] }).items;
}

async function proxy(name: string): Promise<ProxyView | undefined> {
  const res = await call(`/v1/proxies/${name}`);
  return res.status === 200 ? ((await res.json()) as ProxyView) : undefined;
}

async function apply(name: string, token = CI_TOKEN): Promise<void> {
  const res = await call(
    '/v1/proxies',
    { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name }, spec: { provider: 'local' } }) },
    token,
  );
  expect(res.status).toBe(200);
}

async function ready(name: string): Promise<ProxyView> {
  const p = await waitFor(`${name} to be Ready`, async () => ((await proxy(name))?.status.phase === 'Ready' ? proxy(name) : undefined), 30_000);
  if (!p) throw new Error('unreachable');
  const password = p.proxyUrl ? decodeURIComponent(new URL(p.proxyUrl).password) : '';
  if (password) passwords.push(password);
  return p;
}

/** Waits until the events of `query` hold one matching `pick`. */
function eventually(what: string, query: string, pick: (e: EgressEvent) => boolean): Promise<EgressEvent> {
  return waitFor(what, async () => (await events(query)).find(pick), 30_000, 100);
}

function io(): { out: string[]; err: string[]; io: { out: (t: string) => void; err: (t: string) => void } } {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { out: (t) => void out.push(t), err: (t) => void err.push(t) } };
}

beforeAll(async () => {
  const base = testConfig({
    providers: [
      { name: 'local', type: 'local' },
      { name: 'flaky', type: 'local' },
    ],
    queues: ['checks', 'reconcile', 'gc'],
    gcIntervalMs: 1000,
    gcGraceMs: 0,
  });
  config = freezeConfig({ ...base, api: { ...base.api, tokens: [CI_TOKEN, PLAIN_TOKEN], tokenNames: ['ci', '#2'] } });
  roles = await runRoles(config, ['publisher', 'worker', 'scheduler', 'api'], silentLogger(), { providerFactory: factory });
  api = roles.api?.url ?? '';
}, 60_000);

afterAll(async () => {
  const left = (((await (await call('/v1/proxies')).json()) as { items: ProxyView[] }).items ?? []).map((p) => p.name);
  for (const name of left) await call(`/v1/proxies/${name}`, { method: 'DELETE' });
  await waitFor(
    'every proxy gone',
    async () => (((await (await call('/v1/proxies')).json()) as { items: unknown[] }).items.length === 0 ? true : undefined),
    30_000,
  );
  await roles.close();
}, 60_000);

describe('lifecycle decisions become events', () => {
  it('apply: Applied by the token name, then InstanceCreated (apply), InstanceStarted and Ready, in that order', async () => {
    await apply('web-1');
    const p = await ready('web-1');
    const list = await waitFor(
      'the Ready event',
      async () => {
        const e = await events('proxy=web-1');
        return e.some((x) => x.reason === 'Ready') ? e : undefined;
      },
      30_000,
      100,
    );
    expect(list.map((e) => e.reason)).toEqual(['Applied', 'InstanceCreated', 'InstanceStarted', 'Ready']);
    const [applied, created, started] = list;
    expect(applied).toMatchObject({ type: 'Normal', source: 'api', provider: 'local', details: { by: 'ci', outcome: 'created' } });
    expect(applied?.message).toContain('created by ci');
    expect(created).toMatchObject({ source: 'worker', provider: 'local', details: { cause: 'apply', provider: 'local', instance: p.status.instanceName } });
    expect(started?.details).toMatchObject({ url: p.status.url });
  });

  it('a plain token line is shown by its position', async () => {
    await apply('web-2', PLAIN_TOKEN);
    const e = await eventually('web-2 applied', 'proxy=web-2&reason=Applied', () => true);
    expect(e.details).toMatchObject({ by: '#2' });
    await ready('web-2');
  });

  it('a killed proxy host: NotReady (Warning), then a new instance (recreate) and Ready again', async () => {
    const before = await ready('web-2');
    const pid = Number(before.status.instanceId?.split(':')[0]);
    const cursor = (await events('proxy=web-2')).at(-1)?.id ?? '0-0';
    process.kill(pid, 'SIGKILL');
    const back = await eventually('web-2 Ready again', `proxy=web-2&since=${cursor}`, (e) => e.reason === 'Ready');
    const after = await events(`proxy=web-2&since=${cursor}`);
    expect(after.map((e) => e.reason)).toEqual(['NotReady', 'InstanceCreated', 'InstanceStarted', 'Ready']);
    expect(after[0]?.type).toBe('Warning');
    // The exit watch sees the process go at once; a probe of the loop (every 5s) could come first.
    expect(['process-exited', 'refused']).toContain(after[0]?.details?.cause);
    expect(after[1]?.details).toMatchObject({ cause: 'recreate' });
    expect(back.type).toBe('Normal');
  });

  it('an orphaned instance is garbage-collected with its age; each sweep records its counts', async () => {
    await apply('orphan-1');
    const p = await ready('orphan-1');
    const res = await call('/v1/proxies/orphan-1?orphan=true', { method: 'DELETE' });
    expect(res.status).toBe(202);
    const gc = await eventually('the orphan collected', 'proxy=orphan-1&reason=InstanceDeleted', (e) => e.details?.cause === 'gc-orphan');
    expect(gc).toMatchObject({ source: 'worker', provider: 'local', details: { instance: p.status.instanceName, gcReason: 'no-proxy' } });
    expect(typeof gc.details?.ageSeconds).toBe('number');
    expect(gc.message).toMatch(/orphan instance .* old, garbage-collected: proxy "orphan-1" does not exist/);
    const reasons = (await events('proxy=orphan-1')).map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(['DeletionRequested', 'Deleted', 'InstanceDeleted']));
    const sweep = await eventually('a sweep that deleted one', 'reason=GcSweep&provider=local', (e) => e.details?.deleted === 1);
    expect(sweep).toMatchObject({ object: { kind: 'ProviderHealth', name: 'local' } });
    expect(Number(sweep.details?.seen)).toBeGreaterThanOrEqual(1);
  });

  it('a check reason flip: Ok → Timeout is a Warning, back to Ok a Normal, an unchanged result nothing', async () => {
    const check = async (): Promise<void> => {
      expect((await call('/v1/providers/flaky/checks?wait=true', { method: 'POST' })).status).toBe(200);
    };
    flakyReason = 'Ok';
    await check();
    await check();
    flakyReason = 'Timeout';
    await check();
    await eventually('Ok → Timeout', 'reason=CheckReasonChanged&provider=flaky', (e) => e.details?.to === 'Timeout');
    flakyReason = 'Ok';
    await check();
    await check();
    await eventually('Timeout → Ok', 'reason=CheckReasonChanged&provider=flaky', (e) => e.details?.to === 'Ok');
    const flips = await events('reason=CheckReasonChanged&provider=flaky');
    expect(flips.map((e) => [e.type, e.details?.from, e.details?.to])).toEqual([
      ['Warning', 'Ok', 'Timeout'],
      ['Normal', 'Timeout', 'Ok'],
    ]);
    expect(flips[0]).toMatchObject({ source: 'publisher', object: { kind: 'ProviderHealth', name: 'flaky' } });
  });

  it('the scheduler records taking the lead', async () => {
    const [elected] = await events('reason=LeaderElected');
    expect(elected).toMatchObject({ type: 'Normal', source: 'scheduler', object: { kind: 'Scheduler' } });
  });

  it('delete: DeletionRequested by the caller, the instance deleted (delete), then Deleted', async () => {
    await apply('gone-1');
    await ready('gone-1');
    expect((await call('/v1/proxies/gone-1', { method: 'DELETE' })).status).toBe(202);
    await eventually('gone-1 Deleted', 'proxy=gone-1&reason=Deleted', () => true);
    const list = (await events('proxy=gone-1')).map((e) => e.reason);
    expect(list.slice(-3)).toEqual(['DeletionRequested', 'InstanceDeleted', 'Deleted']);
    const [requested] = await events('proxy=gone-1&reason=DeletionRequested');
    expect(requested?.details).toMatchObject({ by: 'ci', orphan: false });
  });
});

describe('GET /v1/events', () => {
  it('filters by type and reason, pages with since as a cursor, a time or a duration, and caps with limit', async () => {
    const warnings = await events('type=Warning');
    expect(warnings.length).toBeGreaterThan(0);
    expect(warnings.every((e) => e.type === 'Warning')).toBe(true);
    // Applies only: GC sweeps keep adding events while this runs.
    const everything = await events('reason=Applied');
    expect(everything.length).toBeGreaterThanOrEqual(4);
    const middle = everything[1];
    const after = await events(`reason=Applied&since=${middle?.id ?? ''}`);
    expect(after.map((e) => e.id)).toEqual(everything.slice(2).map((e) => e.id));
    expect(await events(`reason=Applied&since=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`)).toEqual(everything);
    expect(await events('reason=Applied&since=1h')).toEqual(everything);
    expect((await events('reason=Applied&limit=2')).map((e) => e.id)).toEqual(everything.slice(-2).map((e) => e.id));
    expect((await events(`reason=Applied&limit=1&since=${middle?.id ?? ''}`)).map((e) => e.id)).toEqual([everything[2]?.id]);
  });

  it.each([
    ['since=yesterday', 'since'],
    ['since=2026-13-45', 'since'],
    ['type=Error', 'type'],
    ['reason=Exploded', 'reason'],
    ['kind=Pod', 'kind'],
    ['limit=0', 'limit'],
    ['limit=5000', 'limit'],
    ['limit=ten', 'limit'],
    ['proxy=', 'proxy'],
    [`proxy=${'x'.repeat(300)}`, 'proxy'],
    ['type=Normal&type=Warning', 'type'],
  ])('answers 400 naming the parameter for %s', async (query, param) => {
    const res = await call(`/v1/events?${query}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; message: string };
    expect(body.error).toBe('ERR_BAD_REQUEST');
    expect(body.message).toContain(`"${param}"`);
  });

  it('requires a token like every route', async () => {
    expect((await fetch(`${api}/v1/events`)).status).toBe(401);
  });
});

describe('egress events and describe', () => {
  const env = (): { EGRESS_API_URL: string; EGRESS_API_TOKEN: string } => ({ EGRESS_API_URL: api, EGRESS_API_TOKEN: CI_TOKEN });

  it('prints a kubectl-style table, and {items} with -o json', async () => {
    const t = io();
    expect(await main(['events', '--proxy', 'web-1'], env(), t.io)).toBe(0);
    const lines = t.out.join('').trimEnd().split('\n');
    expect(lines[0]).toMatch(/^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$/);
    expect(lines[1]).toMatch(/^\d+[smhd]\s+Normal\s+Applied\s+proxy\/web-1\s+created by ci/);
    expect(lines.some((l) => /Ready\s+proxy\/web-1\s+ready at http:\/\//.test(l))).toBe(true);
    const j = io();
    expect(await main(['events', '--reason', 'LeaderElected', '-o', 'json'], env(), j.io)).toBe(0);
    const parsed = JSON.parse(j.out.join('')) as { items: EgressEvent[] };
    expect(parsed.items.length).toBeGreaterThan(0);
    expect(parsed.items.every((e) => e.reason === 'LeaderElected')).toBe(true);
  });

  it.each([
    [['events', '--type', 'Bad'], '--type'],
    [['events', '--reason', 'Nope'], '--reason'],
    [['events', '--since', 'whenever'], '--since'],
    [['events', '--limit', '0'], '--limit'],
    [['events', '-o', 'wide'], '-o/--output'],
    [['events', '--watch', '-o', 'yaml'], '-o/--output'],
    [['describe', 'pod', 'x'], 'describe'],
  ])('%j is a usage error (exit 2) naming %s', async (argv, flag) => {
    const t = io();
    expect(await main(argv, env(), t.io)).toBe(2);
    expect(t.err.join('')).toContain(flag);
  });

  it('--watch prints the events so far, then a new one as it is recorded', async () => {
    const t = io();
    const stop = new AbortController();
    const running = main(['events', '--watch', '--proxy', 'watched-1'], env(), t.io, { watchSignal: stop.signal });
    await waitFor('the header', () => t.out.join('').includes('LAST SEEN'), 10_000);
    expect(t.out.join('')).not.toContain('watched-1');
    await apply('watched-1');
    await waitFor('the new event in the watch', () => /Applied\s+proxy\/watched-1\s+created by ci/.test(t.out.join('')), 30_000);
    stop.abort();
    expect(await running).toBe(0);
    await ready('watched-1');
  });

  it('describe proxy: status, conditions and events, and no credentials', async () => {
    const t = io();
    expect(await main(['describe', 'proxy', 'web-1'], env(), t.io)).toBe(0);
    const text = t.out.join('');
    expect(text).toMatch(/^Name:\s+web-1$/m);
    expect(text).toMatch(/^ {2}Phase:\s+Ready$/m);
    expect(text).toMatch(/^ {2}Observed Generation: +1$/m);
    expect(text).toMatch(/^Conditions:\n\s+Type\s+Status\s+Reason/m);
    expect(text).toMatch(/^ {2}Ready\s+True\s+/m);
    expect(text).toMatch(/^Events:\n\s+Type\s+Reason\s+Age\s+From\s+Message\n/m);
    expect(text).toMatch(/Normal\s+InstanceCreated\s+\S+\s+worker\s+instance /);
    for (const secret of passwords) expect(text).not.toContain(secret);
  });

  it('describe ph: targets and the check reason flips', async () => {
    const t = io();
    expect(await main(['describe', 'ph', 'flaky'], env(), t.io)).toBe(0);
    const text = t.out.join('');
    expect(text).toMatch(/^Name:\s+flaky$/m);
    expect(text).toMatch(/^Targets:\n\s+Name\s+Ready\s+Reason/m);
    expect(text).toMatch(/Warning\s+CheckReasonChanged\s+\S+\s+publisher\s+target edge: Ok → Timeout/);
    const missing = io();
    expect(await main(['describe', 'proxy', 'no-such'], env(), missing.io)).toBe(1);
  });
});

describe('after the run', () => {
  it('no event carries a token or a proxy password', async () => {
    const everything = JSON.stringify(await events('limit=1000'));
    expect(passwords.length).toBeGreaterThan(0);
    for (const secret of [CI_TOKEN, PLAIN_TOKEN, ...passwords]) expect(everything).not.toContain(secret);
    const redisPassword = new URL(inject('redisUrl')).password;
    if (redisPassword) expect(everything).not.toContain(redisPassword);
  });
});

describe('leadership', () => {
  it('a second scheduler takes over when the leader closes: LeaderLost (handed back), then LeaderElected by the other', async () => {
    const own = testConfig();
    const first = await runRoles(own, ['scheduler'], silentLogger());
    await waitFor('the first to lead', () => first.scheduler?.leader === true, 10_000);
    const second = await runRoles(own, ['scheduler'], silentLogger());
    try {
      await first.close();
      await waitFor('the second to lead', () => second.scheduler?.leader === true, 10_000);
    } finally {
      await second.close();
    }
    const redis = new Redis(inject('redisUrl'));
    try {
      const list = await new RedisEventStore(redis, own.redis.prefix, own.events, silentLogger()).list({ limit: 100 });
      const line = list.map((e) => `${e.reason}:${e.object.name}`);
      const [a, b] = [list[0]?.object.name ?? '', list[2]?.object.name ?? ''];
      expect(a).not.toBe(b);
      expect(line).toEqual([`LeaderElected:${a}`, `LeaderLost:${a}`, `LeaderElected:${b}`, `LeaderLost:${b}`]);
      expect(list[1]?.type).toBe('Normal');
      expect(list[1]?.message).toContain('handed the lease back');
    } finally {
      await redis.quit();
    }
  });
});
