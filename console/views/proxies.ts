import { api } from '../api.ts';
import { confirmButton, h, replace, since } from '../dom.ts';
import { POOL_LABEL, type Items, type Proxy } from '../types.ts';
import { badge, Notice, phaseTone, table, type View } from '../view.ts';

const PHASES = ['Pending', 'Provisioning', 'Ready', 'Failed', 'Terminating'];
/** Rows drawn at once; the filters narrow the rest. */
const MAX_ROWS = 200;

function readyCondition(p: Proxy): { reason: string; since: string | undefined } {
  const c = p.status.conditions.find((x) => x.type === 'Ready');
  return { reason: c ? `${c.reason}${c.message ? `: ${c.message}` : ''}` : '—', since: c?.lastTransitionTime };
}

/** Proxies: counts by phase and provider, filters and search, one proxy's URL on request, delete. */
export function proxiesView(): View {
  const notice = new Notice();
  const phase = h(
    'select',
    { id: 'proxy-phase' },
    h('option', { value: '' }, 'Any phase'),
    PHASES.map((p) => h('option', { value: p }, p)),
  );
  const provider = h('select', { id: 'proxy-provider' }, h('option', { value: '' }, 'Any provider'));
  const search = h('input', { id: 'proxy-search', type: 'search', placeholder: 'name, label, IP…', autocomplete: 'off' });
  const summary = h('div', { class: 'summary' });
  const list = h('div', { class: 'table-wrap' });
  const revealed = new Map<string, string>();
  let items: Proxy[] = [];
  let shown: unknown;

  async function reveal(name: string): Promise<void> {
    const answer = await api<Proxy>('GET', `/v1/proxies/${encodeURIComponent(name)}`);
    if (!answer.ok) return notice.error(answer.message);
    revealed.set(name, answer.body.proxyUrl ?? '(this proxy has no URL yet)');
    draw();
  }

  async function remove(name: string): Promise<void> {
    const answer = await api<Proxy>('DELETE', `/v1/proxies/${encodeURIComponent(name)}`);
    if (!answer.ok) return notice.error(answer.message);
    notice.ok(`Deletion of proxy ${name} requested.`);
    await refresh();
  }

  function urlCell(p: Proxy): Node {
    const url = revealed.get(p.name);
    if (url !== undefined) {
      const hide = h('button', { type: 'button' }, 'Hide');
      hide.addEventListener('click', () => {
        revealed.delete(p.name);
        draw();
      });
      return h('span', { class: 'secret' }, h('code', {}, url), ' ', hide);
    }
    const show = h('button', { type: 'button', 'aria-label': `Reveal URL of ${p.name}` }, 'Reveal URL');
    show.addEventListener('click', () => void reveal(p.name));
    return show;
  }

  function draw(): void {
    const q = search.value.trim().toLowerCase();
    const selected = items.filter(
      (p) =>
        (phase.value === '' || p.status.phase === phase.value) &&
        (provider.value === '' || p.spec.provider === provider.value) &&
        (q === '' ||
          p.name.toLowerCase().includes(q) ||
          (p.status.egressIp ?? '').includes(q) ||
          Object.entries(p.labels).some(([k, v]) => `${k}=${v}`.toLowerCase().includes(q))),
    );
    const rows = selected.slice(0, MAX_ROWS).map((p) => {
      const ready = readyCondition(p);
      return [
        p.name,
        p.spec.provider + (p.spec.placement ? ` / ${p.spec.placement}` : ''),
        badge(p.metadata.deletionRequestedAt ? 'Terminating' : p.status.phase, phaseTone(p.status.phase)),
        ready.reason,
        since(ready.since),
        p.status.egressIp ?? '—',
        p.labels[POOL_LABEL] ?? '—',
        urlCell(p),
        confirmButton('Delete', `Confirm delete ${p.name}`, () => remove(p.name)),
      ];
    });
    const more = selected.length > MAX_ROWS ? ` (first ${MAX_ROWS} shown: narrow with the filters)` : '';
    replace(
      list,
      h('p', { class: 'meta', id: 'proxy-count' }, `${selected.length} of ${items.length} proxies${more}`),
      table('Proxies', ['Name', 'Provider', 'Phase', 'Ready reason', 'Since', 'Egress IP', 'Pool', 'URL', ''], rows, 'proxies'),
    );
  }

  function drawSummary(): void {
    const providers = [...new Set(items.map((p) => p.spec.provider))].sort();
    const count = (prov: string, ph: string): number => items.filter((p) => p.spec.provider === prov && p.status.phase === ph).length;
    replace(
      summary,
      table(
        'Proxies by provider and phase',
        ['Provider', ...PHASES, 'Total'],
        providers.map((prov) => [prov, ...PHASES.map((ph) => count(prov, ph)), items.filter((p) => p.spec.provider === prov).length]),
      ),
    );
    const current = provider.value;
    replace(
      provider,
      h('option', { value: '' }, 'Any provider'),
      providers.map((p) => h('option', { value: p }, p)),
    );
    provider.value = providers.includes(current) ? current : '';
  }

  async function refresh(): Promise<void> {
    const answer = await api<Items<Proxy>>('GET', '/v1/proxies');
    if (!answer.ok) return notice.error(answer.message);
    if (answer.body === shown) return;
    shown = answer.body;
    items = [...answer.body.items].sort((a, b) => a.name.localeCompare(b.name));
    drawSummary();
    draw();
  }

  for (const control of [phase, provider]) control.addEventListener('change', draw);
  search.addEventListener('input', draw);

  return {
    id: 'proxies',
    title: 'Proxies',
    mount(root) {
      replace(
        root,
        h('h2', {}, 'Proxies'),
        notice.el,
        summary,
        h(
          'div',
          { class: 'filters', role: 'search' },
          h('label', { for: 'proxy-phase' }, 'Phase '),
          phase,
          h('label', { for: 'proxy-provider' }, 'Provider '),
          provider,
          h('label', { for: 'proxy-search' }, 'Search '),
          search,
        ),
        list,
      );
    },
    refresh,
  };
}
