/** What the page's shell carries to the script, in <meta> tags (no inline script: the CSP forbids it). */
export interface ConsolePageOptions {
  view: 'app' | 'sign-in';
  base: string;
  script: string;
  style: string;
  /** The signed-in caller (its token's name) and the session's CSRF token; absent on the sign-in page. */
  caller?: string;
  csrf?: string;
  boardPath: string;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => ESCAPES[ch] ?? ch);
}

/** The console's one HTML document: metadata, the stylesheet and the module script; the script draws the rest. */
export function consolePage(o: ConsolePageOptions): string {
  const meta = (name: string, value: string | undefined): string => (value === undefined ? '' : `<meta name="egress-${name}" content="${escapeHtml(value)}">`);
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${o.view === 'sign-in' ? 'Sign in · ' : ''}egress console</title>`,
    meta('view', o.view),
    meta('base', o.base),
    meta('caller', o.caller),
    meta('csrf', o.csrf),
    meta('board', o.boardPath),
    `<link rel="stylesheet" href="${escapeHtml(o.style)}">`,
    `<script type="module" src="${escapeHtml(o.script)}"></script>`,
    '</head>',
    '<body>',
    '<div id="app"><p class="loading">Loading the console…</p></div>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
