import { consoleCall } from '../api.ts';
import { h, replace, svg } from '../dom.ts';
import { Notice, type View } from '../view.ts';

interface Counters {
  at: number;
  picks: number;
  denials: number;
  bans: number;
  probeFailures: number;
}

const SERIES: { key: keyof Omit<Counters, 'at'>; title: string }[] = [
  { key: 'picks', title: 'Picks' },
  { key: 'bans', title: 'Ban reports' },
  { key: 'denials', title: 'Pick denials' },
  { key: 'probeFailures', title: 'Probe failures' },
];

/** Samples kept (one per refresh). */
const KEEP = 60;

/** A sparkline of per-interval increases, with its numbers as text for screen readers. */
function sparkline(title: string, values: readonly number[]): HTMLElement {
  const width = 240;
  const height = 48;
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(height - (v / max) * (height - 4) - 2).toFixed(1)}`).join(' ');
  const total = values.reduce((a, b) => a + b, 0);
  const chart = svg(
    'svg',
    {
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: 'img',
      'aria-label': `${title}: ${total} in the last ${values.length} samples, at most ${max} per sample`,
    },
    svg('polyline', { points: points || `0,${height - 2} ${width},${height - 2}`, fill: 'none', stroke: 'currentColor', 'stroke-width': 2 }),
  );
  return h('figure', { class: 'spark' }, h('figcaption', {}, `${title}: ${values.at(-1) ?? 0} in the last interval, ${total} shown`), chart);
}

/** Small time series of this API process's counters: picks, ban reports, pick denials, probe failures. */
export function metricsView(): View {
  const notice = new Notice();
  const charts = h('div', { class: 'sparks' });
  const samples: Counters[] = [];

  async function refresh(): Promise<void> {
    const res = await consoleCall('GET', '/counters');
    if (!res.ok) return notice.error(`${res.status} ${res.statusText}`);
    samples.push((await res.json()) as Counters);
    while (samples.length > KEEP + 1) samples.shift();
    const deltas = (key: keyof Omit<Counters, 'at'>): number[] => samples.slice(1).map((s, i) => Math.max(0, s[key] - (samples[i]?.[key] ?? s[key])));
    replace(
      charts,
      SERIES.map((s) => sparkline(s.title, deltas(s.key))),
    );
  }

  return {
    id: 'metrics',
    title: 'Activity',
    mount(root) {
      replace(
        root,
        h('h2', {}, 'Activity'),
        h('p', { class: 'meta' }, "This API process's own counters, sampled while the page is open (every few seconds)."),
        notice.el,
        charts,
      );
    },
    refresh,
  };
}
