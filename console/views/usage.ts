import { api } from '../api.ts';
import { h, replace } from '../dom.ts';
import type { UsageReport, UsageTotals } from '../types.ts';
import { Notice, type View } from '../view.ts';

/** The spans offered, in days back from now. */
const SPANS: [days: number, label: string][] = [
  [1, 'Last 24 hours'],
  [7, 'Last 7 days'],
  [30, 'Last 30 days'],
  [90, 'Last 90 days'],
];
/** Usage changes by the hour: the view reads it again at most this often unless a control changed. */
const READ_EVERY_MS = 60_000;

function bytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
}

function cost(t: UsageTotals, currency: string | null): string {
  return currency === null ? '—' : `${t.cost.total.toFixed(2)} ${currency}`;
}

function cells(t: UsageTotals, currency: string | null): string[] {
  return [
    bytes(t.bytesUp),
    bytes(t.bytesDown),
    String(t.requests),
    String(t.tunnels),
    (t.instanceSeconds / 3600).toFixed(1),
    String(t.instances),
    cost(t, currency),
  ];
}

/** Traffic, instance hours and cost per day by pool, provider, domain, location or machine type (`GET /v1/usage`), with totals. */
export function usageView(): View {
  const notice = new Notice();
  const span = h(
    'select',
    { id: 'usage-span' },
    SPANS.map(([days, label]) => h('option', { value: String(days), selected: days === 7 }, label)),
  );
  const groupBy = h(
    'select',
    { id: 'usage-group' },
    h('option', { value: 'pool' }, 'Pool'),
    h('option', { value: 'provider' }, 'Provider'),
    h('option', { value: 'domain' }, 'Domain'),
    h('option', { value: 'location' }, 'Location'),
    h('option', { value: 'machineType' }, 'Machine type'),
  );
  const summary = h('p', { class: 'meta', id: 'usage-window' });
  const holder = h('div', { id: 'usage-table' });
  let readAt = 0;

  function draw(r: UsageReport): void {
    replace(
      summary,
      `${r.from.slice(0, 16).replace('T', ' ')} to ${r.to.slice(0, 16).replace('T', ' ')} UTC${r.currency === null ? ' · no price table: costs are not configured' : ''}`,
    );
    const headers = ['Day', r.groupBy[0]?.toUpperCase() + r.groupBy.slice(1), 'Up', 'Down', 'Requests', 'Tunnels', 'Instance hours', 'Instances', 'Cost'];
    replace(
      holder,
      h(
        'table',
        { class: 'usage' },
        h('caption', {}, `Usage by ${r.groupBy}`),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            headers.map((t) => h('th', { scope: 'col' }, t)),
          ),
        ),
        h(
          'tbody',
          {},
          r.rows.length === 0
            ? h('tr', {}, h('td', { colspan: headers.length }, 'No usage in this span.'))
            : r.rows.map((row) =>
                h(
                  'tr',
                  {},
                  h('td', {}, row.day),
                  h('td', {}, row.key),
                  cells(row, r.currency).map((c) => h('td', {}, c)),
                ),
              ),
        ),
        h(
          'tfoot',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'row', colspan: 2 }, 'Total'),
            cells(r.totals, r.currency).map((c) => h('td', {}, c)),
          ),
        ),
      ),
    );
  }

  async function refresh(force = false): Promise<void> {
    if (!force && Date.now() - readAt < READ_EVERY_MS) return;
    readAt = Date.now();
    const to = new Date();
    const from = new Date(to.getTime() - Number(span.value) * 86_400_000);
    const q = new URLSearchParams({ from: from.toISOString(), to: to.toISOString(), groupBy: groupBy.value });
    const answer = await api<UsageReport>('GET', `/v1/usage?${q.toString()}`);
    if (!answer.ok) return notice.error(answer.message);
    notice.clear();
    draw(answer.body);
  }

  for (const control of [span, groupBy]) control.addEventListener('change', () => void refresh(true));

  return {
    id: 'usage',
    title: 'Usage',
    mount(root) {
      readAt = 0;
      replace(
        root,
        h('h2', {}, 'Usage and cost'),
        notice.el,
        h('div', { class: 'filters' }, h('label', { for: 'usage-span' }, 'Span '), span, h('label', { for: 'usage-group' }, 'By '), groupBy),
        summary,
        holder,
      );
    },
    refresh: () => refresh(),
  };
}
