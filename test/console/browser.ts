/**
 * A real Chromium for the console suite: Debian's /usr/bin/chromium driven by playwright-core, in a
 * fresh profile under the test's temporary directory; axe-core's accessibility check of a page, and
 * screenshots kept under test-artifacts/console/ (gitignored).
 */
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = resolve(import.meta.dirname, '../../test-artifacts/console');

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** A browser with its own profile in `userDataDir`; every request it makes is appended to `requests`. */
export async function launchBrowser(userDataDir: string, requests: string[]): Promise<BrowserContext> {
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    args: ARGS,
    headless: true,
    viewport: { width: 1280, height: 900 },
  });
  context.on('request', (r) => requests.push(r.url()));
  return context;
}

let axeSource: string | undefined;

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * The serious and critical violations axe-core finds on the page. axe is evaluated through the
 * DevTools protocol, as a page script would not be: the console's CSP rightly refuses inline script.
 */
export async function seriousViolations(page: Page): Promise<string[]> {
  axeSource ??= await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(`${axeSource}\n;0`);
  // Runs in the page (no DOM types here): the whole document, violations only.
  const violations = await page.evaluate(async () => {
    const g = globalThis as unknown as { axe: { run: (ctx: unknown, opts: object) => Promise<{ violations: AxeViolation[] }> }; document: unknown };
    const result = await g.axe.run(g.document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help}, at ${v.nodes.map((n) => n.target.join(' ')).join('; ')}`);
}

/** Saves a screenshot of the viewport (1280×900) as test-artifacts/console/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
}
