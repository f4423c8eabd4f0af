/**
 * Label and field selectors as the kube-apiserver parses them (k8s.io/apimachinery labels.Parse and
 * fields.ParseSelector), for the fake apiserver. A parse failure throws SelectorError, which the server turns
 * into 400 BadRequest.
 *
 * Label grammar: comma-separated requirements, each one of
 *   `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>5`, `k<5`
 * with keys validated as qualified names (optional DNS-subdomain prefix + `/`) and values as label values.
 */

export class SelectorError extends Error {}

export type LabelOp = '=' | '!=' | 'in' | 'notin' | 'exists' | '!' | 'gt' | 'lt';

export interface LabelRequirement {
  key: string;
  op: LabelOp;
  values: string[];
}

const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function validateKey(key: string): void {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) {
    throw new SelectorError(`unable to parse requirement: key: Invalid value: "${key}": prefix part must be a DNS subdomain`);
  }
  if (name.length === 0 || name.length > 63 || !NAME_PART.test(name)) {
    throw new SelectorError(
      `unable to parse requirement: key: Invalid value: "${key}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
}

function validateValue(key: string, value: string, index: number): void {
  if (value.length > 63 || !LABEL_VALUE.test(value)) {
    throw new SelectorError(
      `unable to parse requirement: values[${index}][${key}]: Invalid value: "${value}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
}

type Token = { kind: 'id'; text: string } | { kind: 'op'; text: string };

/** Splits a selector into identifiers and the operator/punctuation tokens the real lexer knows. */
function lex(input: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const special = '=!(),<>';
  while (i < input.length) {
    const c = input[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    if (special.includes(c)) {
      const two = input.slice(i, i + 2);
      if (two === '==' || two === '!=') {
        tokens.push({ kind: 'op', text: two });
        i += 2;
      } else {
        tokens.push({ kind: 'op', text: c });
        i++;
      }
      continue;
    }
    let j = i;
    while (j < input.length && !special.includes(input[j]!) && !/\s/.test(input[j]!)) j++;
    tokens.push({ kind: 'id', text: input.slice(i, j) });
    i = j;
  }
  return tokens;
}

/** Parses a label selector; an empty string selects everything. */
export function parseLabelSelector(input: string): LabelRequirement[] {
  const tokens = lex(input);
  const reqs: LabelRequirement[] = [];
  let pos = 0;
  const peek = (): Token | undefined => tokens[pos];
  const next = (): Token | undefined => tokens[pos++];
  const fail = (what: string): never => {
    throw new SelectorError(`unable to parse requirement: ${what} in selector "${input}"`);
  };
  if (tokens.length === 0) return reqs;
  for (;;) {
    let t = next();
    if (!t) fail('found end of input, expected identifier or "!"');
    if (t!.kind === 'op' && t!.text === '!') {
      const k = next();
      if (!k || k.kind !== 'id') fail('expected identifier after "!"');
      validateKey(k!.text);
      reqs.push({ key: k!.text, op: '!', values: [] });
    } else if (t!.kind === 'id') {
      const key = t!.text;
      validateKey(key);
      const op = peek();
      if (!op || (op.kind === 'op' && op.text === ',')) {
        reqs.push({ key, op: 'exists', values: [] });
      } else {
        pos++;
        if (op.kind === 'op' && (op.text === '=' || op.text === '==' || op.text === '!=')) {
          // A value may be empty: `k=` selects objects whose label k is the empty string.
          const v = peek();
          let value = '';
          if (v && v.kind === 'id') {
            value = v.text;
            pos++;
          } else if (v && !(v.kind === 'op' && v.text === ',')) fail(`found '${v.text}', expected identifier`);
          validateValue(key, value, 0);
          reqs.push({ key, op: op.text === '!=' ? '!=' : '=', values: [value] });
        } else if (op.kind === 'op' && (op.text === '>' || op.text === '<')) {
          const v = next();
          if (!v || v.kind !== 'id' || !/^-?\d+$/.test(v.text)) fail(`for 'gt', 'lt' operators, the value must be an integer`);
          reqs.push({ key, op: op.text === '>' ? 'gt' : 'lt', values: [v!.text] });
        } else if (op.kind === 'id' && (op.text === 'in' || op.text === 'notin')) {
          const open = next();
          if (!open || open.text !== '(') fail(`found '${open?.text ?? ''}', expected: '('`);
          const values: string[] = [];
          for (;;) {
            const v = next();
            if (!v) fail(`found end of input, expected: ')'`);
            if (v!.kind === 'op' && v!.text === ')') {
              // `k in ()` and a trailing comma are accepted as an empty value, as the real lexer does.
              if (values.length === 0) values.push('');
              break;
            }
            if (v!.kind === 'op' && v!.text === ',') {
              values.push('');
              continue;
            }
            if (v!.kind !== 'id') fail(`found '${v!.text}', expected: ',', ')' or identifier`);
            values.push(v!.text);
            const sep = next();
            if (!sep) fail(`found end of input, expected: ',' or ')'`);
            if (sep!.text === ')') break;
            if (sep!.text !== ',') fail(`found '${sep!.text}', expected: ',' or ')'`);
          }
          values.forEach((v, i) => validateValue(key, v, i));
          reqs.push({ key, op: op.text, values });
        } else {
          fail(`found '${op.text}', expected: in, notin, =, ==, !=, gt, lt`);
        }
      }
    } else {
      fail(`found '${t!.text}', expected: !, identifier, or 'end of string'`);
    }
    t = next();
    if (!t) break;
    if (!(t.kind === 'op' && t.text === ',')) fail(`found '${t.text}', expected: ',' or 'end of string'`);
  }
  return reqs;
}

export function matchesLabels(reqs: readonly LabelRequirement[], labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  return reqs.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case '=':
        return has && v === r.values[0];
      case '!=':
        return !has || v !== r.values[0];
      case 'in':
        return has && r.values.includes(v!);
      case 'notin':
        return !has || !r.values.includes(v!);
      case 'exists':
        return has;
      case '!':
        return !has;
      case 'gt':
      case 'lt': {
        if (!has || !/^-?\d+$/.test(v!)) return false;
        const n = Number(v);
        const bound = Number(r.values[0]);
        return r.op === 'gt' ? n > bound : n < bound;
      }
    }
  });
}

export interface FieldRequirement {
  field: string;
  op: '=' | '!=';
  value: string;
}

/** Parses a field selector (`a=b,c!=d`); `supported` lists the fields the resource accepts. */
export function parseFieldSelector(input: string, supported: readonly string[]): FieldRequirement[] {
  if (input.trim() === '') return [];
  return input.split(',').map((term) => {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(term);
    if (!m) throw new SelectorError(`invalid selector: '${input}'; can't understand '${term}'`);
    const field = m[1]!;
    if (!supported.includes(field)) throw new SelectorError(`field label not supported: ${field}`);
    return { field, op: m[2] === '!=' ? '!=' : '=', value: m[3]! };
  });
}

export function matchesFields(reqs: readonly FieldRequirement[], get: (field: string) => string): boolean {
  return reqs.every((r) => (r.op === '=' ? get(r.field) === r.value : get(r.field) !== r.value));
}
