/**
 * The Compute Engine list `filter` language as the fake understands it:
 *   comparisons `field = value`, `field != value`, `field > value`, `field < value`, `field : value`
 *   (substring; `field:*` = has a value), values bare or double/single-quoted, dotted fields
 *   (`labels.managed-by`, `scheduling.preemptible`); terms combined by juxtaposition or `AND` (AND), `OR`,
 *   `NOT` / `-`, parentheses; and the legacy regex form `field eq 'regex'` / `field ne 'regex'` (full match).
 * A malformed expression throws FilterError (the server answers 400 `invalid`).
 */

export class FilterError extends Error {}

type Node =
  | { kind: 'and' | 'or'; items: Node[] }
  | { kind: 'not'; item: Node }
  | { kind: 'cmp'; field: string; op: '=' | '!=' | '>' | '<' | ':' | 'eq' | 'ne'; value: string };

type Tok = { t: 'word' | 'str' | 'op' | 'lp' | 'rp'; v: string };

function lex(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '(' || c === ')') {
      out.push({ t: c === '(' ? 'lp' : 'rp', v: c });
      i++;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      let s = '';
      while (j < src.length && src[j] !== c) {
        // Only an escaped quote or backslash is unescaped; other backslashes stay (regex values).
        if (src[j] === '\\' && (src[j + 1] === c || src[j + 1] === '\\')) j++;
        s += src[j];
        j++;
      }
      if (j >= src.length) throw new FilterError('unterminated string');
      out.push({ t: 'str', v: s });
      i = j + 1;
    } else if (src.startsWith('!=', i)) {
      out.push({ t: 'op', v: '!=' });
      i += 2;
    } else if ('=<>:'.includes(c)) {
      out.push({ t: 'op', v: c });
      i++;
    } else {
      let j = i;
      while (j < src.length && !/[\s()"'=<>:!]/.test(src[j]!)) j++;
      if (j === i) throw new FilterError(`unexpected '${c}'`);
      out.push({ t: 'word', v: src.slice(i, j) });
      i = j;
    }
  }
  return out;
}

export function parseFilter(src: string): Node | undefined {
  const toks = lex(src);
  if (toks.length === 0) return undefined;
  let p = 0;
  const peek = (): Tok | undefined => toks[p];

  const parseOr = (): Node => {
    const items = [parseAnd()];
    while (peek()?.t === 'word' && peek()!.v === 'OR') {
      p++;
      items.push(parseAnd());
    }
    return items.length === 1 ? items[0]! : { kind: 'or', items };
  };
  const parseAnd = (): Node => {
    const items = [parseUnary()];
    for (;;) {
      const t = peek();
      if (!t || t.t === 'rp' || (t.t === 'word' && t.v === 'OR')) break;
      if (t.t === 'word' && t.v === 'AND') p++;
      items.push(parseUnary());
    }
    return items.length === 1 ? items[0]! : { kind: 'and', items };
  };
  const parseUnary = (): Node => {
    const t = peek();
    if (!t) throw new FilterError('unexpected end of filter');
    if (t.t === 'word' && t.v === 'NOT') {
      p++;
      return { kind: 'not', item: parseUnary() };
    }
    if (t.t === 'lp') {
      p++;
      const inner = parseOr();
      if (peek()?.t !== 'rp') throw new FilterError('missing )');
      p++;
      return inner;
    }
    return parseCmp();
  };
  const parseCmp = (): Node => {
    const f = toks[p++];
    if (!f || f.t !== 'word') throw new FilterError('expected a field name');
    let negate = false;
    let field = f.v;
    if (field.startsWith('-')) {
      negate = true;
      field = field.slice(1);
    }
    if (!/^[A-Za-z_][\w.-]*$/.test(field)) throw new FilterError(`bad field name '${field}'`);
    const o = toks[p++];
    let op: Extract<Node, { kind: 'cmp' }>['op'];
    if (o?.t === 'op') op = o.v as typeof op;
    else if (o?.t === 'word' && (o.v === 'eq' || o.v === 'ne')) op = o.v;
    else throw new FilterError(`expected an operator after '${field}'`);
    const v = toks[p++];
    let value: string;
    if (v?.t === 'str' || v?.t === 'word') value = v.v;
    else if (op === ':' && v?.t === 'op') throw new FilterError('expected a value');
    else throw new FilterError(`expected a value after '${field} ${op}'`);
    const node: Node = { kind: 'cmp', field, op, value };
    return negate ? { kind: 'not', item: node } : node;
  };

  const tree = parseOr();
  if (p !== toks.length) throw new FilterError(`unexpected '${toks[p]!.v}'`);
  return tree;
}

function fieldValue(obj: unknown, path: string): unknown {
  let cur: unknown = obj;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

/** A field value as the text filters compare (objects as JSON). */
function asString(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v);
}

export function matchesFilter(node: Node | undefined, obj: unknown): boolean {
  if (!node) return true;
  switch (node.kind) {
    case 'and':
      return node.items.every((n) => matchesFilter(n, obj));
    case 'or':
      return node.items.some((n) => matchesFilter(n, obj));
    case 'not':
      return !matchesFilter(node.item, obj);
    case 'cmp': {
      const actual = asString(fieldValue(obj, node.field));
      // URL-valued fields (zone, machineType) also compare by their last path segment.
      const tail = actual?.includes('/') ? actual.slice(actual.lastIndexOf('/') + 1) : actual;
      const equal = actual !== undefined && (actual === node.value || tail === node.value);
      switch (node.op) {
        case '=':
          return equal;
        case '!=':
          return !equal;
        case ':':
          return node.value === '*' ? actual !== undefined : actual !== undefined && actual.includes(node.value);
        case '>':
        case '<': {
          if (actual === undefined) return false;
          const [a, b] = /^-?\d+(\.\d+)?$/.test(actual) && /^-?\d+(\.\d+)?$/.test(node.value) ? [Number(actual), Number(node.value)] : [actual, node.value];
          return node.op === '>' ? a > b : a < b;
        }
        case 'eq':
        case 'ne': {
          let re: RegExp;
          try {
            re = new RegExp(`^(?:${node.value})$`);
          } catch {
            throw new FilterError(`bad regular expression '${node.value}'`);
          }
          const hit = actual !== undefined && re.test(actual);
          return node.op === 'eq' ? hit : !hit;
        }
      }
    }
  }
}

export type Filter = ReturnType<typeof parseFilter>;
