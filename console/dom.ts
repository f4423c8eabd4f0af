/** A small DOM builder: `h('td', {class: 'x'}, 'text', child)`. Text is always set as text, never parsed as HTML. */
export type Child = Node | string | number | false | null | undefined | readonly Child[];
export type Attrs = Record<string, string | number | boolean | undefined | ((ev: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2).toLowerCase(), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child as readonly Child[]);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(typeof child === 'number' ? String(child) : (child as string)));
  }
}

/** Replaces an element's children. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

const SVG = 'http://www.w3.org/2000/svg';

export function svg(tag: string, attrs: Record<string, string | number>, ...children: Node[]): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const c of children) el.appendChild(c);
  return el;
}

/** "3m ago", "2h ago", from an ISO time. */
export function ago(iso: string | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

/** A time element showing how long ago, with the exact time as its datetime and title. */
export function since(iso: string | undefined): HTMLElement {
  if (!iso) return h('span', {}, '—');
  return h('time', { datetime: iso, title: iso }, ago(iso));
}

/** A button that asks once more before acting: the first click arms it, the second runs `action`. */
export function confirmButton(label: string, confirmLabel: string, action: () => Promise<void>): HTMLButtonElement {
  let armed = false;
  const button = h('button', { type: 'button', class: 'danger' }, label);
  button.addEventListener('click', () => {
    if (!armed) {
      armed = true;
      button.textContent = confirmLabel;
      button.classList.add('armed');
      return;
    }
    button.disabled = true;
    void action().finally(() => {
      button.disabled = false;
      armed = false;
      button.textContent = label;
      button.classList.remove('armed');
    });
  });
  return button;
}
