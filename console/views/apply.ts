import { api } from '../api.ts';
import { h, replace } from '../dom.ts';
import { Notice, table, type View } from '../view.ts';

interface ApplyAnswer {
  items: { name: string; outcome: string }[];
  dryRun?: boolean;
}

const EXAMPLE = ['apiVersion: egress-proxies/v1', 'kind: Proxy', 'metadata:', '  name: my-proxy', 'spec:', '  provider: local', ''].join('\n');

/** The route a YAML text goes to: ProxyPools to /v1/pools, Proxies to /v1/proxies; a mix is refused here (apply each kind on its own). */
export function routeOf(text: string): { path: string; kind: string } | { mixed: true } {
  const docs = text.split(/^---[ \t]*$/m).filter((d) => d.trim() !== '' && !/^(\s*#.*\n?)*\s*$/.test(d));
  const pools = docs.filter((d) => /^kind:[ \t]*["']?ProxyPool["']?[ \t]*$/m.test(d)).length;
  if (pools > 0 && pools < docs.length) return { mixed: true };
  return pools > 0 ? { path: '/v1/pools', kind: 'proxypool' } : { path: '/v1/proxies', kind: 'proxy' };
}

/** Apply a YAML document (Proxies or ProxyPools): validate first or apply, with the API's own messages. */
export function applyView(): View {
  const notice = new Notice();
  const text = h('textarea', { id: 'apply-text', rows: 16, cols: 80, spellcheck: 'false' }, EXAMPLE);
  const outcome = h('div', {});
  const validate = h('button', { type: 'button' }, 'Validate (dry run)');
  const apply = h('button', { type: 'button', class: 'primary' }, 'Apply');

  async function send(dryRun: boolean): Promise<void> {
    const route = routeOf(text.value);
    if ('mixed' in route) {
      notice.error('This text mixes Proxy and ProxyPool documents: apply each kind on its own (or use `egress apply -f`, which checks both first).');
      return;
    }
    const answer = await api<ApplyAnswer>('POST', `${route.path}${dryRun ? '?dryRun=true' : ''}`, { text: text.value, type: 'application/yaml' });
    if (!answer.ok) {
      replace(outcome);
      notice.error(`Rejected, nothing applied (${answer.status}):\n${answer.message}`);
      return;
    }
    notice.ok(dryRun ? 'Valid: nothing was applied.' : 'Applied.');
    replace(
      outcome,
      table(
        dryRun ? 'Dry run' : 'Applied',
        ['Object', 'Outcome'],
        answer.body.items.map((i) => [`${route.kind}/${i.name}`, i.outcome]),
      ),
    );
  }

  validate.addEventListener('click', () => void send(true));
  apply.addEventListener('click', () => void send(false));

  return {
    id: 'apply',
    title: 'Apply',
    mount(root) {
      replace(
        root,
        h('h2', {}, 'Apply a document'),
        h('p', {}, 'Paste Proxy or ProxyPool documents (YAML, several separated by ---). The API checks them whole: all or nothing.'),
        h('label', { for: 'apply-text' }, 'YAML'),
        text,
        h('p', { class: 'actions' }, validate, ' ', apply),
        notice.el,
        outcome,
      );
    },
    refresh: () => Promise.resolve(),
  };
}
