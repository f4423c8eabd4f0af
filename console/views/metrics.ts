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

type Series = keyof Omit<Counters, 'at'>;

const SERIES: { key: Series; title: string }[] = [
  { key: 'picks', title: 'Picks' },
  { key: 'bans', title: 'Ban reports' },
  { key: 'denials', title: 'Pick denials' },
  { key: 'probeFailures', title: 'Probe failures' },
];

/** A sparkline of per-interval increases, its numbers also as text (caption and accessible name). */
function sparkline(title: string, values: readonly number[], minutes: number): HTMLElement {
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
      'aria-label': `${title}: ${total} in the last ${minutes} minutes, at most ${max} per interval`,
    },
    svg('polyline', { points: values.length > 1 ? points : `0,${height - 2} ${width},${height - 2}`, fill: 'none', stroke: 'currentColor', 'stroke-width': 2 }),
  );
  return h('figure', { class: 'spark' }, h('figcaption', {}, `${title}: ${total} in the last ${minutes} min`), chart);
}

/** Small time series of this API process's counters: picks, ban reports, pick denials, probe failures. */
export function metricsView(): View {
  const notice = new Notice();
  const charts = h('div', { class: 'sparks' });

  async function refresh(): Promise<void> {
    const res = await consoleCall('GET', '/counters');
    if (!res.ok) return notice.error(`${res.status} ${res.statusText}`);
    const { everyMs, samples } = (await res.json()) as { everyMs: number; samples: Counters[] };
    const minutes = Math.max(1, Math.round(((samples.at(-1)?.at ?? 0) - (samples[0]?.at ?? 0)) / 60_000));
    // Increases between samples; a counter that went down (a restart) counts from zero.
    const deltas = (key: Series): number[] => samples.slice(1).map((s, i) => Math.max(0, s[key] - (samples[i]?.[key] ?? 0)));
    replace(
      charts,
      SERIES.map((s) => sparkline(s.title, deltas(s.key), minutes)),
      h('p', { class: 'meta' }, `One point every ${Math.round(everyMs / 1000)} s since the console was first opened in this process (an hour at most).`),
    );
  }

  return {
    id: 'metrics',
    title: 'Activity',
    mount(root) {
      replace(
        root,
        h('h2', {}, 'Activity'),
        h('p', { class: 'meta' }, "This API process's own counters (the process serving this page; other API replicas count their own)."),
        notice.el,
        charts,
      );
    },
    refresh,
  };
}
