/**
 * The console in a real browser against a real `egress up`: sign-in, every view and every action,
 * an accessibility check of each view (axe-core, serious and critical violations fail), the
 * browser defences (session cookie, CSRF, Origin, CSP) and no request to another origin.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { spawnEgress, waitUpAndLocalReady, type EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { processesUnder } from '../support/processes-under.ts';
import { describeWithTool } from '../support/required-tools.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';
import { launchBrowser, screenshot, seriousViolations } from './browser.ts';

/** What the suite reads of the API's answers: lists of items, a pool's members. */
interface Answer {
  items: { name: string; message: string }[];
  members: { items: { name: string; phase: string }[] };
}

describeWithTool('chromium', 'the console in a browser', { timeout: 120_000 }, () => {
  let dir: string;
  let up: EgressProcess;
  let api: string;
  let headers: Record<string, string>;
  let token: string;
  let prefix: string;
  let context: BrowserContext;
  let page: Page;
  const requests: string[] = [];
  const pageErrors: string[] = [];

  /** The API as the CLI calls it (bearer token), to see what the page did. */
  const apiGet = async (path: string): Promise<{ status: number; body: Answer }> => {
    const res = await fetch(`${api}${path}`, { headers });
    return { status: res.status, body: res.status === 200 ? ((await res.json()) as Answer) : { items: [], members: { items: [] } } };
  };

  /** Opens a view by its navigation link, waits for its heading, checks it with axe and keeps a screenshot. */
  const openView = async (link: string, heading: string): Promise<void> => {
    await page.getByRole('link', { name: link, exact: true }).click();
    await page.getByRole('heading', { level: 2, name: heading }).waitFor();
  };
  const checkView = async (shot: string): Promise<void> => {
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, shot);
  };

  beforeAll(async () => {
    dir = await tempDir('egress-console-');
    const config = join(dir, 'egress.yaml');
    await writeFile(config, 'providers:\n  - name: local\n    type: local\n');
    prefix = uniquePrefix();
    up = spawnEgress(['up', '--port', '0', '--config', config, '--data-dir', join(dir, 'data'), '--prefix', prefix], {
      REDIS_URL: inject('redisUrl'),
      EGRESS_LOG_LEVEL: 'info',
    });
    ({ apiUrl: api, headers } = await waitUpAndLocalReady(up));
    token = (headers.authorization ?? '').replace(/^Bearer /, '');
    context = await launchBrowser(join(dir, 'chromium-profile'), requests);
    page = context.pages()[0] ?? (await context.newPage());
    page.on('pageerror', (err) => pageErrors.push(err.message));
    page.on('console', (msg) => {
      if (msg.type() === 'error') pageErrors.push(msg.text());
    });
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await up?.stop();
    // The local provider's proxy hosts outlive `egress up` by design; end those this suite started.
    for (const p of dir ? await processesUnder(dir) : []) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
  });

  test('without a session the console sends the browser to sign in, and its API answers 401', async () => {
    const page1 = await fetch(`${api}/console`, { redirect: 'manual' });
    expect(page1.status).toBe(302);
    expect(page1.headers.get('location')).toBe('/console/sign-in');
    expect((await fetch(`${api}/console/v1/proxies`)).status).toBe(401);
    expect((await fetch(`${api}/console/counters`)).status).toBe(401);
    const signIn = await fetch(`${api}/console/sign-in`);
    expect(signIn.status).toBe(200);
    const csp = signIn.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(signIn.headers.get('x-frame-options')).toBe('DENY');
  });

  test('sign-in refuses a wrong token, and with the right one sets an HttpOnly, SameSite=Strict, path-scoped session cookie (not the token)', async () => {
    await page.goto(`${api}/console`);
    await page.waitForURL(`${api}/console/sign-in`);
    await page.getByLabel('API token').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, 'sign-in');
    await page.getByLabel('API token').fill('not-the-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText('the token is not valid').waitFor();

    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${api}/console`);
    await page.getByRole('heading', { level: 2, name: 'Providers' }).waitFor();
    const cookies = await context.cookies(`${api}/console`);
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({ name: 'egress_console', path: '/console', httpOnly: true, sameSite: 'Strict', secure: false });
    expect(cookies[0]?.value).not.toContain(token);
    // The raw cookie opens nothing outside the console: /v1 still wants the bearer token.
    expect((await fetch(`${api}/v1/proxies`, { headers: { cookie: `egress_console=${cookies[0]?.value}` } })).status).toBe(401);
    expect(await page.content()).not.toContain(token);
  });

  test('providers: each target with its readiness, reason and since-when; an ad-hoc check shows its result', async () => {
    const card = page.getByRole('region', { name: /^local/ });
    await card.getByText('Ready', { exact: true }).first().waitFor();
    expect(await card.getByRole('table', { name: 'Targets of local' }).getByRole('row').count()).toBeGreaterThan(1);
    await checkView('providers');
    await card.getByRole('button', { name: 'Run check' }).click();
    await page
      .getByRole('status')
      .getByText(/Check of local finished/)
      .waitFor({ timeout: 60_000 });
    expect(await page.getByLabel('Result of the last check').textContent()).toContain('"ready"');
  });

  test('apply: the API’s own validation messages, then a Proxy and a ProxyPool applied', async () => {
    await openView('Apply', 'Apply a document');
    const text = page.getByLabel('YAML');
    await text.fill('kind: Proxy\nmetadata:\n  name: bad-one\nspec:\n  provider: nowhere\n');
    await page.getByRole('button', { name: 'Validate (dry run)' }).click();
    await page.getByRole('status').getByText('"nowhere" is not a configured provider').waitFor();
    await checkView('apply-rejected');
    expect((await apiGet('/v1/proxies/bad-one')).status).toBe(404);

    await text.fill('kind: Proxy\nmetadata:\n  name: web-1\n  labels: { team: crawl }\nspec:\n  provider: local\n');
    await page.getByRole('button', { name: 'Apply', exact: true }).click();
    await page.getByRole('table', { name: 'Applied' }).getByText('proxy/web-1').waitFor();
    await text.fill('kind: ProxyPool\nmetadata: { name: crawl }\nspec: { replicas: 2, template: { spec: { provider: local } } }\n');
    await page.getByRole('button', { name: 'Apply', exact: true }).click();
    await page.getByRole('table', { name: 'Applied' }).getByText('proxypool/crawl').waitFor();
    expect((await apiGet('/v1/proxies/web-1')).status).toBe(200);
    expect((await apiGet('/v1/pools/crawl')).status).toBe(200);
    // Who applied is the token's name, as the CLI's applies record it.
    const applied = await apiGet('/v1/events?reason=Applied');
    expect(applied.body.items.map((e) => e.message).join('\n')).toMatch(/by local/);
  });

  test('proxies: counts by phase and provider, filters and search, one URL revealed on request, delete', async () => {
    await waitFor(
      'web-1 and the pool members to be Ready',
      async () => {
        const { body } = await apiGet('/v1/proxies?ready=true');
        return body.items.length >= 3;
      },
      60_000,
    );
    await openView('Proxies', 'Proxies');
    const table = page.getByRole('table', { name: 'Proxies', exact: true });
    await table.getByRole('cell', { name: 'web-1', exact: true }).waitFor();
    const byPhase = page.getByRole('table', { name: 'Proxies by provider and phase' }).getByRole('row', { name: /local/ });
    await waitFor('3 Ready local proxies in the summary', async () => (await byPhase.getByRole('cell').allTextContents()).join(' ') === 'local 0 0 3 0 0 3');
    // No credential on the page until asked for.
    expect(await page.content()).not.toMatch(/http:\/\/[^@\s"]+:[^@\s"]+@/);
    await page.getByLabel('Search').fill('team=crawl');
    await page.locator('#proxy-count', { hasText: /^1 of 3 proxies$/ }).waitFor();
    await page.getByLabel('Search').fill('');
    await page.getByLabel('Phase').selectOption('Ready');
    await page.locator('#proxy-count', { hasText: /^3 of 3 proxies$/ }).waitFor();
    await checkView('proxies');
    await page.getByRole('button', { name: 'Reveal URL of web-1' }).click();
    const revealed = await page.locator('.secret code').textContent();
    expect(revealed).toMatch(/^http:\/\/[^:]+:[^@]+@127\.0\.0\.1:\d+$/);
    await page.getByRole('button', { name: 'Hide' }).click();
    expect(await page.content()).not.toContain(revealed ?? '');

    const row = table.getByRole('row', { name: /web-1/ });
    await row.getByRole('button', { name: 'Delete' }).click();
    await row.getByRole('button', { name: 'Confirm delete web-1' }).click();
    await page.getByRole('status').getByText('Deletion of proxy web-1 requested.').waitFor();
    await waitFor('web-1 to be gone', async () => (await apiGet('/v1/proxies/web-1')).status === 404, 60_000);
  });

  test('pools: desired, ready, rotating, failed, live sessions and members; rotate, then delete', async () => {
    await openView('Pools', 'Pools');
    const card = page.getByRole('region', { name: /^crawl/ });
    await card.getByText('Desired').waitFor();
    await card.getByText('Members', { exact: true }).click();
    const members = card.getByRole('table', { name: 'Members of crawl' });
    await waitFor('two members listed', async () => (await members.getByRole('row').count()) === 3);
    await checkView('pools');
    // Some picks, for the Activity view's series.
    for (let i = 0; i < 3; i++) expect((await fetch(`${api}/v1/pools/crawl/pick`, { headers })).status).toBe(200);
    // Two crawler sessions (one picks twice): the card counts them once each, refreshing by itself.
    for (const session of ['a', 'b', 'a']) expect((await fetch(`${api}/v1/pools/crawl/pick?session=${session}`, { headers })).status).toBe(200);
    const sessions = card
      .locator('dl.counts > div')
      .filter({ has: page.getByText('Sessions', { exact: true }) })
      .locator('dd');
    await waitFor('the live sessions counted on the card', async () => (await sessions.textContent()) === '2');
    const before = (await apiGet('/v1/pools/crawl')).body.members.items.map((m) => m.name);
    await card.getByRole('button', { name: 'Rotate' }).click();
    await card.getByRole('button', { name: 'Confirm rotate crawl' }).click();
    await page
      .getByRole('status')
      .getByText(/Rotation of pool crawl requested: 2 of 2 members/)
      .waitFor();
    await waitFor(
      'the pool to have replaced its members',
      async () => {
        const { body } = await apiGet('/v1/pools/crawl');
        const now = body.members.items.filter((m) => m.phase === 'Ready').map((m) => m.name);
        return now.length === 2 && now.every((n) => !before.includes(n));
      },
      90_000,
    );
    await card.getByRole('button', { name: 'Delete' }).click();
    await card.getByRole('button', { name: 'Confirm delete crawl' }).click();
    await page.getByRole('status').getByText('Deletion of pool crawl requested.').waitFor();
    await waitFor('the pool to be gone', async () => (await apiGet('/v1/pools/crawl')).status === 404, 90_000);
  });

  test('events: the history, and a new event appears live without reloading', async () => {
    await openView('Events', 'Events');
    const list = page.getByRole('list', { name: 'Events, newest first' });
    await list.getByText('Proxy/web-1').first().waitFor();
    await checkView('events');
    const res = await fetch(`${api}/v1/proxies`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/yaml' },
      body: 'kind: Proxy\nmetadata:\n  name: live-1\nspec:\n  provider: local\n',
    });
    expect(res.status).toBe(200);
    await list.getByText('Proxy/live-1').first().waitFor({ timeout: 20_000 });
    await page.getByLabel('Type').selectOption('Warning');
    await waitFor('the filter to hide it', async () => (await list.getByText('Proxy/live-1').count()) === 0);
    await page.getByLabel('Type').selectOption('');
  });

  test('failed jobs: listed with a link into Bull Board, retried one at a time and all at once', async () => {
    // A check for a provider this worker does not know fails for good.
    const checks = new Queue(QUEUES.checks, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix });
    try {
      const job = await checks.add('check', { provider: 'later', trigger: 'adhoc' }, { jobId: 'console-retry-me' });
      await waitFor('the job to fail', async () => (await job.getState()) === 'failed', 30_000);
      await openView('Failed jobs', 'Failed jobs');
      const row = page.getByRole('row', { name: /console-retry-me/ });
      await row.getByText('provider "later" is not configured in this worker').waitFor();
      expect(await row.getByRole('link', { name: 'Job console-retry-me of checks in Bull Board' }).getAttribute('href')).toBe(
        '/admin/queues/queue/checks/console-retry-me',
      );
      await checkView('jobs');
      await row.getByRole('button', { name: 'Retry job console-retry-me of checks' }).click();
      await page.getByRole('status').getByText('Job console-retry-me of checks sent back to be retried.').waitFor();
      await waitFor('it to run again', async () => (await checks.getJob('console-retry-me'))?.attemptsMade === 2 && (await job.getState()) === 'failed');
      await page.getByRole('button', { name: 'Retry all failed jobs' }).click();
      await page
        .getByRole('status')
        .getByText(/^[1-9]\d* failed jobs sent back to be retried\.$/)
        .waitFor();
      await waitFor('it to run a third time', async () => (await checks.getJob('console-retry-me'))?.attemptsMade === 3);
    } finally {
      await checks.close();
    }
  });

  test('usage: per day by pool, provider or domain with totals; the pool members made and deleted above are its instances', async () => {
    await openView('Usage', 'Usage and cost');
    const usage = page.getByRole('table', { name: 'Usage by pool' });
    // The crawl pool's members (two, then two replacements) lived under the pool; their lives came from the worker's events.
    const crawl = usage.getByRole('row', { name: /crawl/ }).first();
    await crawl.waitFor({ timeout: 20_000 });
    await waitFor('the crawl pool to count its members', async () => Number((await crawl.getByRole('cell').nth(7).textContent()) ?? '0') >= 4);
    await expect(usage.locator('tfoot').getByRole('rowheader', { name: 'Total' }).count()).resolves.toBe(1);
    await expect(page.locator('#usage-window').textContent()).resolves.toMatch(/UTC · no price table/);
    await checkView('usage');
    await page.getByLabel('By').selectOption('provider');
    await page.getByRole('table', { name: 'Usage by provider' }).getByRole('row', { name: /local/ }).first().waitFor();
    await page.getByLabel('Span').selectOption('1');
    await page.getByRole('table', { name: 'Usage by provider' }).getByRole('row', { name: /local/ }).first().waitFor();
  });

  test('activity: small time series of the process’s own counters', async () => {
    await openView('Activity', 'Activity');
    for (const title of ['Picks', 'Ban reports', 'Pick denials', 'Probe failures']) {
      await page.getByRole('img', { name: new RegExp(`^${title}: `) }).waitFor({ timeout: 20_000 });
    }
    // The picks of the pools' test, counted since sign-in.
    await page.getByRole('img', { name: /^Picks: [3-9]\d* in the last/ }).waitFor();
    await checkView('activity');
  });

  test('a cross-site request, or one without the CSRF header, is refused 403 and changes nothing', async () => {
    const csrf = (await page.locator('meta[name="egress-csrf"]').getAttribute('content')) ?? '';
    expect(csrf).not.toBe('');
    const doc = 'kind: Proxy\nmetadata:\n  name: forged\nspec:\n  provider: local\n';
    // The browser context's own cookie jar, as a forged request would carry it (were SameSite not there).
    const crossSite = await context.request.post(`${api}/console/v1/proxies`, {
      headers: { origin: 'http://evil.example', 'x-egress-csrf': csrf, 'content-type': 'application/yaml' },
      data: doc,
    });
    expect(crossSite.status()).toBe(403);
    const fetchSite = await context.request.post(`${api}/console/v1/proxies`, {
      headers: { 'sec-fetch-site': 'cross-site', 'x-egress-csrf': csrf, 'content-type': 'application/yaml' },
      data: doc,
    });
    expect(fetchSite.status()).toBe(403);
    const noCsrf = await context.request.post(`${api}/console/v1/proxies`, { headers: { 'content-type': 'application/yaml' }, data: doc });
    expect(noCsrf.status()).toBe(403);
    expect((await noCsrf.json()).error).toBe('ERR_CSRF');
    const wrongCsrf = await context.request.delete(`${api}/console/v1/proxies/live-1`, { headers: { 'x-egress-csrf': 'x'.repeat(43) } });
    expect(wrongCsrf.status()).toBe(403);
    const signOut = await context.request.post(`${api}/console/sign-out`);
    expect(signOut.status()).toBe(403);
    expect((await apiGet('/v1/proxies/forged')).status).toBe(404);
    expect((await apiGet('/v1/proxies/live-1')).status).toBe(200);
    // A malformed sign-in is a 400 and a body past the API's limit a 413: never a 5xx.
    const malformed = await context.request.post(`${api}/console/session`, { headers: { 'content-type': 'application/json' }, data: '{"token":' });
    expect(malformed.status()).toBe(400);
    const big = await context.request.post(`${api}/console/v1/proxies`, {
      headers: { 'x-egress-csrf': csrf, 'content-type': 'application/yaml' },
      data: 'x'.repeat(2 * 1024 * 1024),
    });
    expect(big.status()).toBe(413);
  });

  test('sign-out ends the session: the page is back at sign-in and the old cookie opens nothing', async () => {
    const old = (await context.cookies(`${api}/console`))[0]?.value ?? '';
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${api}/console/sign-in`);
    expect(await context.cookies(`${api}/console`)).toEqual([]);
    const csrfless = await fetch(`${api}/console/v1/proxies`, { headers: { cookie: `egress_console=${old}` } });
    expect(csrfless.status).toBe(401);
  });

  test('the page ran under its CSP without errors and asked nothing of another origin', () => {
    const origin = new URL(api).origin;
    const foreign = requests.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:'));
    expect(foreign).toEqual([]);
    expect(requests.some((u) => u.includes('/console/assets/app.'))).toBe(true);
    // Refusals the tests provoked (a rejected document, a 401) are logged by Chromium as failed loads; nothing else may be.
    expect(pageErrors.filter((e) => !/^Failed to load resource: the server responded with a status of 4\d\d/.test(e))).toEqual([]);
  });
});
