import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BULL_BOARD_CSP, withoutExternalTags } from '../../src/api/bull-board.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { testConfig } from '../support/config.ts';

const TOKEN = 'bull-board-offline-token-0123456789';
/** A reference the browser would follow to another origin: an absolute or protocol-relative URL in an attribute or a CSS url()/@import. */
const OUTSIDE = /(?:\b(?:href|src)\s*=\s*["']?|url\(\s*["']?|@import\s+["']?)(?:https?:)?\/\//i;

/**
 * Bull Board's page must render on a machine without Internet: its UI ships a Google Fonts
 * stylesheet link, which a browser waits on before it paints (a screenshot at load showed only
 * "Loading"). The page is served without it, and under a policy that lets nothing load from
 * another origin.
 */
describe('Bull Board loads nothing from outside', () => {
  let roles: RunningRoles;
  let api: string;
  const get = (path: string) => fetch(`${api}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });

  beforeAll(async () => {
    roles = await runRoles(testConfig({ tokens: [TOKEN] }), ['api'], silentLogger());
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles.close();
  });

  test.each(['/admin/queues', '/admin/queues/queue/checks'])('the page at %s references no other origin, and its policy allows none', async (path) => {
    const res = await get(path);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toBe(BULL_BOARD_CSP);
    const html = await res.text();
    expect(html).toContain('<div id="root">');
    expect(html).not.toMatch(OUTSIDE);
    expect(html).not.toContain('fonts.googleapis.com');
    // What the page loads is there, from the API itself, and references nothing outside either.
    const assets = [...html.matchAll(/(?:href|src)="(static\/[^"]+)"/g)].map((m) => m[1] ?? '');
    expect(assets.some((a) => a.endsWith('.css'))).toBe(true);
    expect(assets.some((a) => a.endsWith('.js'))).toBe(true);
    for (const asset of assets.filter((a) => a.endsWith('.css'))) {
      const css = await get(`/admin/queues/${asset}`);
      expect(css.status, asset).toBe(200);
      expect(css.headers.get('content-security-policy')).toBe(BULL_BOARD_CSP);
      expect(await css.text()).not.toMatch(OUTSIDE);
    }
  });

  test('the policy names no origin but the API itself', () => {
    expect(BULL_BOARD_CSP).toMatch(/^default-src 'self' /);
    expect(BULL_BOARD_CSP).not.toMatch(/https?:|\*/);
  });

  test('tags that load from another origin are taken out; the page’s own stay', () => {
    const page = [
      '<link href="https://fonts.googleapis.com/css2?family=X" rel="stylesheet">',
      '<link href="static/css/main.css" rel="stylesheet">',
      "<script src='//cdn.example/x.js'></script>",
      '<script defer src="static/js/main.js"></script>',
    ].join('\n');
    expect(withoutExternalTags(page)).toBe('<link href="static/css/main.css" rel="stylesheet">\n<script defer src="static/js/main.js"></script>');
  });
});
