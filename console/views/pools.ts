import { api } from '../api.ts';
import { confirmButton, h, replace, since } from '../dom.ts';
import type { EgressEvent, Items, Pool, PoolDetail } from '../types.ts';
import { badge, Notice, phaseTone, table, type View } from '../view.ts';

/** Blocked reports by pool, then by domain, from the fleet's recent `Blocked` events. */
function bansByPool(events: readonly EgressEvent[]): Map<string, Map<string, number>> {
  const out = new Map<string, Map<string, number>>();
  for (const e of events) {
    const pool = e.details?.pool;
    const domain = e.details?.domain;
    if (typeof pool !== 'string' || typeof domain !== 'string') continue;
    const byDomain = out.get(pool) ?? new Map<string, number>();
    byDomain.set(domain, (byDomain.get(domain) ?? 0) + 1);
    out.set(pool, byDomain);
  }
  return out;
}

/** Pools: desired, ready, rotating, failed, bans by domain, members; rotate and delete. */
export function poolsView(): View {
  const notice = new Notice();
  const list = h('div', { class: 'cards' });
  const open = new Set<string>();
  let shown: unknown;

  async function rotate(name: string): Promise<void> {
    const answer = await api<{ members: number; requested: number }>('POST', `/v1/pools/${encodeURIComponent(name)}/rotate`);
    if (!answer.ok) return notice.error(answer.message);
    notice.ok(`Rotation of pool ${name} requested: ${answer.body.requested} of ${answer.body.members} members to be replaced.`);
    shown = undefined;
    await refresh();
  }

  async function remove(name: string): Promise<void> {
    const answer = await api<Pool>('DELETE', `/v1/pools/${encodeURIComponent(name)}`);
    if (!answer.ok) return notice.error(answer.message);
    notice.ok(`Deletion of pool ${name} requested.`);
    shown = undefined;
    await refresh();
  }

  async function members(name: string, into: HTMLElement): Promise<void> {
    const answer = await api<PoolDetail>('GET', `/v1/pools/${encodeURIComponent(name)}`);
    if (!answer.ok) return notice.error(answer.message);
    replace(
      into,
      table(
        `Members of ${name}`,
        ['Member', 'Provider', 'Phase', 'Egress IP', 'Created', 'Last error'],
        answer.body.members.items.map((m) => [
          m.name,
          m.provider + (m.placement ? ` / ${m.placement}` : ''),
          badge(m.deletionRequestedAt ? 'Terminating' : m.phase, phaseTone(m.phase)),
          m.egressIp ?? '—',
          since(m.createdAt),
          m.lastError ?? '',
        ]),
      ),
    );
  }

  function card(pool: Pool, bans: Map<string, number> | undefined, sessions: number | undefined): HTMLElement {
    const s = pool.status;
    const detail = h('details', { open: open.has(pool.name) }, h('summary', {}, 'Members'));
    const body = h('div', {});
    detail.appendChild(body);
    detail.addEventListener('toggle', () => {
      if (detail.open) {
        open.add(pool.name);
        void members(pool.name, body);
      } else open.delete(pool.name);
    });
    if (detail.open) void members(pool.name, body);
    const banRows = [...(bans ?? new Map<string, number>())].sort((a, b) => b[1] - a[1]).slice(0, 20);
    return h(
      'section',
      { class: 'card', 'aria-labelledby': `pool-${pool.name}` },
      h('h3', { id: `pool-${pool.name}` }, pool.name, ' ', pool.metadata.deletionRequestedAt ? badge('Terminating', 'neutral') : ''),
      h(
        'dl',
        { class: 'counts' },
        [
          ['Desired', s.desired],
          ['Ready', s.ready],
          ['Current', s.current],
          ['Rotating', s.rotating],
          ['Failed', s.failed],
          ['Sessions', sessions ?? '—'],
        ].map(([k, v]) => h('div', {}, h('dt', {}, String(k)), h('dd', {}, String(v)))),
      ),
      s.lastError ? h('p', { class: 'error-text' }, s.lastError) : '',
      banRows.length > 0
        ? table(`Ban reports of ${pool.name} by domain (recent events)`, ['Domain', 'Reports'], banRows)
        : h('p', { class: 'meta' }, 'No ban reports in the recent events.'),
      h(
        'div',
        { class: 'actions' },
        confirmButton('Rotate', `Confirm rotate ${pool.name}`, () => rotate(pool.name)),
        confirmButton('Delete', `Confirm delete ${pool.name}`, () => remove(pool.name)),
      ),
      detail,
    );
  }

  async function refresh(): Promise<void> {
    const [pools, blocked] = await Promise.all([api<Items<Pool>>('GET', '/v1/pools'), api<Items<EgressEvent>>('GET', '/v1/events?reason=Blocked&limit=1000')]);
    if (!pools.ok) return notice.error(pools.message);
    const items = [...pools.body.items].sort((a, b) => a.name.localeCompare(b.name));
    // Crawler sessions each pool holds now (picked within the session TTL): one small read per pool,
    // and they change without the pools changing.
    const sessions = await Promise.all(
      items.map(async (p) => {
        const answer = await api<{ live: number }>('GET', `/v1/pools/${encodeURIComponent(p.name)}/sessions`);
        return answer.ok ? answer.body.live : undefined;
      }),
    );
    const sessionsKey = sessions.join(',');
    if (pools.body === shown && (!blocked.ok || blocked.body === shownBans) && sessionsKey === shownSessions) return;
    shown = pools.body;
    shownBans = blocked.ok ? blocked.body : undefined;
    shownSessions = sessionsKey;
    const bans = bansByPool(blocked.ok ? blocked.body.items : []);
    replace(
      list,
      items.length === 0 ? h('p', {}, 'No pools. Apply a ProxyPool document to make one.') : items.map((p, i) => card(p, bans.get(p.name), sessions[i])),
    );
  }
  let shownSessions = '';
  let shownBans: unknown;

  return {
    id: 'pools',
    title: 'Pools',
    mount(root) {
      replace(root, h('h2', {}, 'Pools'), notice.el, list);
    },
    refresh,
  };
}
