/**
 * docs/crawlers.md's code, run as the page shows it: its first `sh` block (curl) and its first
 * `js` block (Crawlee) against a real API, two real local proxies in a pool, and a local site
 * that blocks the first request to /trap. The JSON blocks of the page are held to real answers.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { ROOT } from '../support/cli.ts';
import { testConfig, uniquePrefix } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';
import { freezeConfig, DEFAULT_PICK_SETTINGS } from '../../src/config/app.ts';

const TOKEN = 'crawlers-doc-token-0123456789';

/** The fenced blocks of a Markdown page with their info string, in order. */
function codeBlocks(markdown: string): { lang: string; code: string }[] {
  return [...markdown.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1] ?? '', code: m[2] ?? '' }));
}

describe('docs/crawlers.md, run', () => {
  const prefix = uniquePrefix();
  let roles: RunningRoles;
  let api: string;
  let site: Server;
  let siteUrl: string;
  const hits: string[] = [];
  let blocks: { lang: string; code: string }[];
  const auth = { authorization: `Bearer ${TOKEN}` };

  beforeAll(async () => {
    blocks = codeBlocks(await readFile(resolve(ROOT, 'docs/crawlers.md'), 'utf8'));
    // The local site: every page answers 200, but the first visit to /trap is a 403 (a ban).
    let trapped = false;
    site = createServer((req, res) => {
      hits.push(req.url ?? '');
      if (req.url === '/trap' && !trapped) {
        trapped = true;
        res.writeHead(403, { 'content-type': 'text/html' }).end('<html><body>blocked</body></html>');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><body>page ${req.url}</body></html>`);
    });
    site.listen(0, '127.0.0.1');
    await once(site, 'listening');
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;

    // Local proxies may reach the site (127.0.0.1 is refused by default), as the page's yaml block
    // allows it; the API's own listener stays refused.
    const providers = (parseYaml(blocks.find((b) => b.lang === 'yaml')?.code ?? '') as { providers: never[] }).providers;
    expect(providers).toEqual([{ name: 'local', type: 'local', proxies: { egressPolicy: { allow: ['127.0.0.1/32'] } } }]);
    const base = testConfig({ prefix, tokens: [TOKEN], queues: ['reconcile'], providers });
    roles = await runRoles(freezeConfig({ ...base, picks: { ...DEFAULT_PICK_SETTINGS, memberCacheMs: 0 } }), ['worker', 'api'], silentLogger());
    api = roles.api?.url ?? '';
    // The pool, as a user applies it; its reconcile makes the two members.
    const pool = { kind: 'ProxyPool', metadata: { name: 'crawl' }, spec: { replicas: 2, template: { spec: { provider: 'local' } } } };
    const applied = await fetch(`${api}/v1/pools`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(pool) });
    expect(applied.status).toBe(200);
    await waitFor(
      'both members Ready',
      async () => {
        const { items } = (await (await fetch(`${api}/v1/proxies?ready=true`, { headers: auth })).json()) as { items: ProxyView[] };
        return items.length === 2;
      },
      40_000,
    );
  });
  afterAll(async () => {
    await fetch(`${api}/v1/pools/crawl`, { method: 'DELETE', headers: auth });
    await waitFor(
      'members gone',
      async () => ((await (await fetch(`${api}/v1/proxies`, { headers: auth })).json()) as { items: unknown[] }).items.length === 0,
      30_000,
    );
    await roles.close();
    site.close();
  });

  test('the curl example: a sticky session, a blocked report moves it; the JSON answers are as documented', async () => {
    const sh = blocks.filter((b) => b.lang === 'sh');
    const json = blocks.filter((b) => b.lang === 'json');
    expect(sh.length).toBeGreaterThanOrEqual(2);
    const script = `${sh[0]?.code ?? ''}\necho '--- json'\n${sh[1]?.code ?? ''}`;
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], {
      env: { PATH: process.env.PATH ?? '', EGRESS_API_URL: api, EGRESS_API_TOKEN: TOKEN, URL: `${siteUrl}/hello`, DOMAIN: 'curl-site.example' },
    });
    const [curlPart = '', jsonPart = ''] = stdout.split('--- json\n');
    const lines = curlPart.split('\n');
    const first = /^session s1 uses (127\.0\.0\.1:\d+)$/.exec(lines[0] ?? '')?.[1];
    expect(first, stdout).toBeDefined();
    expect(curlPart).toContain('<html><body>page /hello</body></html>');
    expect(curlPart).toContain(`sticky: s1 still uses ${first}`);
    const moved = /session s1 moved to (127\.0\.0\.1:\d+)/.exec(curlPart)?.[1];
    expect(moved).toBeDefined();
    expect(moved).not.toBe(first);
    expect(hits).toContain('/hello');

    // The feedback answer and the JSON pick have the documented fields.
    const feedbackLine = lines.find((l) => l.startsWith('{')) ?? '';
    const documented = json.map((b) => Object.keys(JSON.parse(b.code) as object).sort());
    expect(Object.keys(JSON.parse(feedbackLine) as object).sort()).toEqual(documented[1]);
    const pick = JSON.parse(jsonPart) as Record<string, unknown>;
    expect(Object.keys(pick).sort()).toEqual(documented[0]);
    expect(pick).toMatchObject({ pool: 'crawl', outcome: 'kept', session: 's1', domain: 'example.com' });
  });

  test('the Crawlee example: one session sticks to one member; a 403 reported through the pool moves it', async () => {
    const js = blocks.find((b) => b.lang === 'js');
    expect(js).toBeDefined();
    const pages = ['/p1', '/p2', '/trap', '/p3', '/p4'];
    const child = spawn(process.execPath, ['--input-type=module'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        EGRESS_API_URL: api,
        EGRESS_API_TOKEN: TOKEN,
        START_URLS: pages.map((p) => siteUrl + p).join(','),
        SESSIONS: '1',
        CONCURRENCY: '1',
        CRAWLEE_STORAGE_DIR: await tempDir('egress-crawlee-'),
        CRAWLEE_LOG_LEVEL: 'ERROR',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.stdin.end(js?.code);
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code, out).toBe(0);
    const fetched = [...out.matchAll(/^fetched http:\/\/127\.0\.0\.1:\d+(\/\w+) 200 through :(\d+) in (\S+)$/gm)].map((m) => ({
      page: m[1],
      port: m[2],
      session: m[3],
    }));
    expect(fetched.map((f) => f.page).sort(), out).toEqual([...pages].sort());
    expect(new Set(fetched.map((f) => f.session)).size).toBe(1);
    const portOf = (page: string): string | undefined => fetched.find((f) => f.page === page)?.port;
    expect(portOf('/p2')).toBe(portOf('/p1'));
    expect(portOf('/trap')).not.toBe(portOf('/p1'));
    expect(portOf('/p3')).toBe(portOf('/trap'));
    expect(portOf('/p4')).toBe(portOf('/trap'));
    expect(hits.filter((h) => h === '/trap')).toHaveLength(2);
    expect(out).not.toMatch(/egress-crawl-[a-z]{5}:/); // no credentials printed
  });
});
