import { consoleCall, page } from './api.ts';
import { ago, h, replace } from './dom.ts';
import type { View } from './view.ts';
import { providersView } from './views/providers.ts';
import { proxiesView } from './views/proxies.ts';
import { poolsView } from './views/pools.ts';
import { eventsView } from './views/events.ts';
import { jobsView } from './views/jobs.ts';
import { applyView } from './views/apply.ts';
import { metricsView } from './views/metrics.ts';
import { usageView } from './views/usage.ts';

/** How often the open view re-reads the API (unchanged answers are 304s). */
const REFRESH_MS = 3000;

function signIn(root: HTMLElement): void {
  const token = h('input', { id: 'token', type: 'password', autocomplete: 'current-password', required: true, spellcheck: 'false' });
  const error = h('p', { class: 'notice', role: 'alert' });
  const form = h(
    'form',
    { class: 'sign-in' },
    h('h1', {}, 'egress console'),
    h('p', {}, 'Paste an API token: the one of --api-token-file, or the file `egress up` keeps in its data directory (api-token).'),
    h('label', { for: 'token' }, 'API token'),
    token,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
    error,
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void (async () => {
      const res = await fetch(`${page.base}/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ token: token.value }),
        credentials: 'same-origin',
      });
      token.value = '';
      if (res.ok) {
        window.location.assign(page.base);
        return;
      }
      const body = (await res.json().catch(() => ({}))) as { message?: string };
      error.className = 'notice error';
      error.textContent = `Not signed in: ${body.message ?? res.statusText}`;
      token.focus();
    })();
  });
  replace(root, h('main', {}, form));
  token.focus();
  // Arrived from another site (a SameSite=Strict cookie is not sent then) while signed in: go on.
  void fetch(`${page.base}/session`, { credentials: 'same-origin', headers: { accept: 'application/json' } }).then((res) => {
    if (res.ok) window.location.assign(page.base);
  });
}

function app(root: HTMLElement): void {
  const views: View[] = [providersView(), proxiesView(), poolsView(), eventsView(), jobsView(), usageView(), applyView(), metricsView()];
  const main = h('main', { id: 'main', tabindex: -1 });
  const links = views.map((v) => h('a', { href: `#${v.id}`, id: `nav-${v.id}` }, v.title));
  const signOut = h('button', { type: 'button' }, 'Sign out');
  signOut.addEventListener('click', () => {
    void consoleCall('POST', '/sign-out').then(() => window.location.assign(`${page.base}/sign-in`));
  });
  replace(
    root,
    h(
      'header',
      {},
      h('h1', {}, 'egress console'),
      h(
        'nav',
        { 'aria-label': 'Views' },
        h(
          'ul',
          {},
          links.map((a) => h('li', {}, a)),
        ),
      ),
      h('p', { class: 'who' }, 'Signed in as ', h('strong', {}, page.caller), ' ', signOut),
    ),
    main,
  );

  let current: View | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let generation = 0;
  const tick = async (view: View, gen: number): Promise<void> => {
    try {
      await view.refresh();
    } catch {
      // A failed read (the API restarting) is tried again on the next tick.
    }
    // "3m ago" stays true between redraws.
    for (const t of document.querySelectorAll('time[datetime]')) t.textContent = ago(t.getAttribute('datetime') ?? undefined);
    if (gen === generation) timer = setTimeout(() => void tick(view, gen), REFRESH_MS);
  };
  const show = (): void => {
    const id = window.location.hash.slice(1) || 'providers';
    const view = views.find((v) => v.id === id) ?? views[0];
    if (!view || view === current) return;
    clearTimeout(timer);
    current = view;
    for (const a of links) {
      if (a.id === `nav-${view.id}`) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    document.title = `${view.title} · egress console`;
    view.mount(main);
    generation++;
    void tick(view, generation);
  };
  window.addEventListener('hashchange', show);
  show();
}

const root = document.getElementById('app');
if (root) {
  if (page.view === 'sign-in') signIn(root);
  else app(root);
}
