/**
 * First render of the console with a large fleet (`npm run bench -- console`): an API (in process,
 * its own Redis) holding 1,000 proxies, Debian's Chromium through playwright-core signed in to the
 * console; each round navigates afresh to the Proxies view and measures, in the page, the time from
 * navigation start to the table drawn with its count ("1000 of 1000 proxies"), and the same for the
 * Providers view. Also the size of the page's script, raw and gzipped as served. Target (issue 23):
 * first render ≤ 1 s with 1,000 proxies; script ≤ 250 KB compressed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { runRoles } from '../src/cli/run-roles.ts';
import { silentLogger } from '../src/logging.ts';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { fmt, summarize } from './stats.ts';
import { benchConfig } from './support/app-config.ts';

const PROXIES = Number(process.env.BENCH_PROXIES ?? 1000);
const ROUNDS = Number(process.env.BENCH_RUNS ?? 10);
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

function fleetYaml(n: number): string {
  const docs: string[] = [];
  for (let i = 0; i < n; i++) {
    const name = `bench-${String(i).padStart(4, '0')}`;
    docs.push(`kind: Proxy\nmetadata:\n  name: ${name}\n  labels: { team: t${i % 10} }\nspec:\n  provider: local\n`);
  }
  return docs.join('---\n');
}

export async function runConsoleBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-console-'));
  const redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  // The API alone: the proxies stay Pending (no worker), which draws the same rows as Ready ones.
  const roles = await runRoles(
    benchConfig(redis.url, '{bench-console}', dir, { api: { host: '127.0.0.1', port: 0, tokens: [], maxBodyBytes: 4 * 1024 * 1024, allowedHosts: [] } }),
    ['api'],
    silentLogger(),
  );
  const api = roles.api?.url ?? '';
  const context = await chromium.launchPersistentContext(join(dir, 'chromium-profile'), {
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    headless: true,
    viewport: { width: 1280, height: 900 },
  });
  try {
    const applied = await fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: fleetYaml(PROXIES) });
    if (applied.status !== 200) throw new Error(`applying the fleet: ${applied.status} ${await applied.text()}`);
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${api}/console/sign-in`);
    await page.getByLabel('API token').fill('none');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${api}/console`);

    const script = (await page.locator('script[type=module]').getAttribute('src')) ?? '';
    const raw = (await (await fetch(`${api}${script}`)).arrayBuffer()).byteLength;
    const gzipped = Number((await fetch(`${api}${script}`, { headers: { 'accept-encoding': 'gzip' } })).headers.get('content-length'));

    const measure = async (hash: string, ready: string): Promise<number> => {
      await page.goto(`${api}/console${hash}`);
      // Runs in the page (no DOM types here): the time since navigation start once `selector` is drawn.
      const handle = await page.waitForFunction(
        (selector) =>
          (globalThis as unknown as { document: { querySelector(s: string): unknown } }).document.querySelector(selector) ? performance.now() : false,
        ready,
        { polling: 'raf', timeout: 30_000 },
      );
      return (await handle.jsonValue()) as number;
    };
    const proxiesMs: number[] = [];
    const providersMs: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      // about:blank between rounds: each is a fresh document (the script comes from the browser's cache, as on a revisit).
      await page.goto('about:blank');
      proxiesMs.push(await measure('#proxies', `#proxy-count`));
      await page.goto('about:blank');
      providersMs.push(await measure('#providers', '.cards p, .cards section'));
    }
    const count = await page.goto(`${api}/console#proxies`).then(() => page.locator('#proxy-count').textContent());
    const p = summarize(proxiesMs);
    const v = summarize(providersMs);
    console.log(`\nConsole first render, ${PROXIES} proxies, ${ROUNDS} rounds (Chromium ${context.browser()?.version() ?? ''}), "${count}"\n`);
    console.log('| view | p50 ms | max ms |');
    console.log('|---|---|---|');
    console.log(`| Proxies (table of the first 200, counts of all) | ${fmt(p.p50, 0)} | ${fmt(Math.max(...proxiesMs), 0)} |`);
    console.log(`| Providers | ${fmt(v.p50, 0)} | ${fmt(Math.max(...providersMs), 0)} |`);
    console.log(`\nscript: ${(raw / 1024).toFixed(1)} KB, ${(gzipped / 1024).toFixed(1)} KB gzipped`);
    console.log(
      JSON.stringify({
        bench: 'console',
        proxies: PROXIES,
        rounds: ROUNDS,
        proxiesP50Ms: p.p50,
        proxiesMaxMs: Math.max(...proxiesMs),
        providersP50Ms: v.p50,
        scriptBytes: raw,
        scriptGzipBytes: gzipped,
      }),
    );
  } finally {
    await context.close();
    await roles.close();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
