import { h, replace } from './dom.ts';

/** One tab of the console: builds its controls once, then redraws its data on each refresh. */
export interface View {
  readonly id: string;
  readonly title: string;
  mount(root: HTMLElement): void;
  refresh(): Promise<void>;
}

/** A live region that says what an action did (or what the API refused, with its message). */
export class Notice {
  readonly el = h('div', { class: 'notice', role: 'status', 'aria-live': 'polite' });

  ok(text: string): void {
    this.el.className = 'notice ok';
    replace(this.el, text);
  }

  error(text: string): void {
    this.el.className = 'notice error';
    replace(this.el, h('pre', {}, text));
  }

  clear(): void {
    this.el.className = 'notice';
    replace(this.el);
  }
}

/** A table with a caption and column headers; `rows` are lists of cells. */
export function table(caption: string, headers: readonly string[], rows: readonly (readonly (Node | string | number)[])[], className = ''): HTMLTableElement {
  return h(
    'table',
    { class: className },
    h('caption', {}, caption),
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
      rows.map((r) =>
        h(
          'tr',
          {},
          r.map((cell) => h('td', {}, cell)),
        ),
      ),
    ),
  );
}

/** A badge for a yes/no or phase value, worded (never colour alone). */
export function badge(text: string, tone: 'good' | 'bad' | 'warn' | 'neutral'): HTMLElement {
  return h('span', { class: `badge ${tone}` }, text);
}

export function phaseTone(phase: string): 'good' | 'bad' | 'warn' | 'neutral' {
  if (phase === 'Ready') return 'good';
  if (phase === 'Failed') return 'bad';
  if (phase === 'Terminating') return 'neutral';
  return 'warn';
}
