import { api } from '../api.ts';
import { h, replace, since } from '../dom.ts';
import type { EgressEvent, Items } from '../types.ts';
import { badge, Notice, type View } from '../view.ts';

/** Events kept on the page at most (newest). */
const KEEP = 1000;

/** The fleet's event history, live: polled with `since=<last id>`, newest first, filtered on the page. */
export function eventsView(): View {
  const notice = new Notice();
  const type = h(
    'select',
    { id: 'event-type' },
    h('option', { value: '' }, 'Any type'),
    h('option', { value: 'Normal' }, 'Normal'),
    h('option', { value: 'Warning' }, 'Warning'),
  );
  const search = h('input', { id: 'event-search', type: 'search', placeholder: 'object, reason, message…', autocomplete: 'off' });
  const live = h('p', { class: 'meta', id: 'events-live' }, 'Live: polling every few seconds.');
  const list = h('ol', { class: 'events', 'aria-label': 'Events, newest first' });
  let events: EgressEvent[] = [];
  let last: string | undefined;

  function draw(): void {
    const q = search.value.trim().toLowerCase();
    const selected = events.filter(
      (e) =>
        (type.value === '' || e.type === type.value) &&
        (q === '' || `${e.object.kind}/${e.object.name} ${e.reason} ${e.message} ${e.provider ?? ''}`.toLowerCase().includes(q)),
    );
    replace(
      list,
      selected.length === 0
        ? h('li', {}, 'No events.')
        : [...selected]
            .reverse()
            .map((e) =>
              h(
                'li',
                { class: `event ${e.type.toLowerCase()}` },
                since(e.time),
                ' ',
                badge(e.type, e.type === 'Warning' ? 'warn' : 'neutral'),
                ' ',
                h('strong', {}, e.reason),
                ' ',
                h('span', { class: 'object' }, `${e.object.kind}/${e.object.name}`),
                ' ',
                h('span', {}, e.message),
                ' ',
                h('span', { class: 'meta' }, `(${e.source})`),
              ),
            ),
    );
  }

  async function refresh(): Promise<void> {
    const query = last === undefined ? '/v1/events?limit=500' : `/v1/events?limit=1000&since=${encodeURIComponent(last)}`;
    const answer = await api<Items<EgressEvent>>('GET', query);
    if (!answer.ok) return notice.error(answer.message);
    const fresh = answer.body.items.filter((e) => last === undefined || e.id !== last);
    if (fresh.length === 0 && last !== undefined) return;
    events = [...events, ...fresh].slice(-KEEP);
    last = events.at(-1)?.id ?? last;
    draw();
  }

  type.addEventListener('change', draw);
  search.addEventListener('input', draw);

  return {
    id: 'events',
    title: 'Events',
    mount(root) {
      replace(
        root,
        h('h2', {}, 'Events'),
        notice.el,
        live,
        h(
          'div',
          { class: 'filters', role: 'search' },
          h('label', { for: 'event-type' }, 'Type '),
          type,
          h('label', { for: 'event-search' }, 'Search '),
          search,
        ),
        list,
      );
    },
    refresh,
  };
}
