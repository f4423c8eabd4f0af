import { api } from '../api.ts';
import { h, replace, since } from '../dom.ts';
import type { Items, ProviderHealth } from '../types.ts';
import { badge, Notice, table, type View } from '../view.ts';

interface CheckAnswer {
  provider: string;
  jobId: string;
  result?: unknown;
}

/** Providers: each one's readiness and each target's, with reason and since-when; an ad-hoc check. */
export function providersView(): View {
  const notice = new Notice();
  const list = h('div', { class: 'cards' });
  const result = h('pre', { class: 'result', 'aria-label': 'Result of the last check', tabindex: 0 });
  const resultSection = h('section', { hidden: true, 'aria-labelledby': 'last-check' }, h('h3', { id: 'last-check' }, 'Last check result'), result);

  async function check(name: string, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    notice.ok(`Checking ${name}…`);
    try {
      const answer = await api<CheckAnswer>('POST', `/v1/providers/${encodeURIComponent(name)}/checks?wait=true`);
      if (!answer.ok) {
        notice.error(answer.message);
        return;
      }
      notice.ok(`Check of ${name} finished (job ${answer.body.jobId}).`);
      resultSection.hidden = false;
      result.textContent = JSON.stringify(answer.body.result, null, 2);
      await refresh();
    } finally {
      button.disabled = false;
    }
  }

  function card(ph: ProviderHealth): HTMLElement {
    const button = h('button', { type: 'button' }, 'Run check');
    button.addEventListener('click', () => void check(ph.name, button));
    const s = ph.status;
    return h(
      'section',
      { class: 'card', 'aria-labelledby': `provider-${ph.name}` },
      h('h3', { id: `provider-${ph.name}` }, ph.name, ' ', s.ready ? badge('Ready', 'good') : badge('Not ready', 'bad')),
      h('p', { class: 'meta' }, 'Since ', since(s.lastTransitionTime), ' · last checked ', since(s.lastCheckTime)),
      table(
        `Targets of ${ph.name}`,
        ['Target', 'Ready', 'Reason', 'Message', 'Since'],
        s.targets.map((t) => [t.name, t.ready ? badge('Ready', 'good') : badge('Not ready', 'bad'), t.reason, t.message, since(t.lastTransitionTime)]),
      ),
      button,
    );
  }

  let shown: unknown;

  async function refresh(): Promise<void> {
    const answer = await api<Items<ProviderHealth>>('GET', '/v1/providerhealths');
    if (!answer.ok) {
      notice.error(answer.message);
      return;
    }
    // An unchanged answer (304) is the same object: nothing to redraw, focus stays where it is.
    if (answer.body === shown) return;
    shown = answer.body;
    const items = [...answer.body.items].sort((a, b) => a.name.localeCompare(b.name));
    replace(list, items.length === 0 ? h('p', {}, 'No provider has been checked yet.') : items.map(card));
  }

  return {
    id: 'providers',
    title: 'Providers',
    mount(root) {
      replace(root, h('h2', {}, 'Providers'), notice.el, list, resultSection);
    },
    refresh,
  };
}
