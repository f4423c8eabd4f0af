/**
 * Secret validation and defaulting as the real apiserver does it: `data` values are base64 (bad base64
 * fails decoding: 400 BadRequest "Secret in version "v1" cannot be handled as a Secret: illegal base64 data
 * at input byte N"), keys must be config keys (422), `stringData` is merged into `data` (its keys win) and
 * never stored, `type` defaults to Opaque and cannot change, `immutable: true` freezes data, at most 1 MiB.
 */
import type { FakeObject, IncomingObject, KindRules } from './object-store.ts';
import { validateSubdomainName } from './object-store.ts';
import { canonical } from './pod-rules.ts';
import { badRequest, invalid } from './status.ts';

const CONFIG_KEY = /^[-._a-zA-Z0-9]+$/;
const BASE64_CHAR = /[A-Za-z0-9+/]/;
const MAX_SECRET_BYTES = 1024 * 1024;

/** The offset of the first byte Go's StdEncoding rejects (it skips \r and \n), or -1 for valid base64. */
export function base64ErrorOffset(s: string): number {
  const chars: { c: string; at: number }[] = [];
  for (let i = 0; i < s.length; i++) if (s[i] !== '\r' && s[i] !== '\n') chars.push({ c: s[i]!, at: i });
  for (let i = 0; i < chars.length; i++) {
    const { c, at } = chars[i]!;
    if (BASE64_CHAR.test(c)) continue;
    if (c !== '=') return at;
    // Padding: only in the last quantum, at position 2 or 3 of it, and nothing but padding after it.
    const inQuantum = i % 4;
    const rest = chars.slice(i);
    const ok = (inQuantum === 2 && rest.length === 2 && rest[1]!.c === '=') || (inQuantum === 3 && rest.length === 1);
    return ok ? -1 : at;
  }
  if (chars.length % 4 !== 0) return chars[chars.length - (chars.length % 4)]?.at ?? s.length;
  return -1;
}

function checkKeys(name: string, field: 'data' | 'stringData', keys: string[]): void {
  const causes = keys
    .filter((k) => k.length > 253 || !CONFIG_KEY.test(k))
    .map((k) => ({
      field: `${field}[${k}]`,
      message: `Invalid value: "${k}": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
    }));
  if (causes.length) throw invalid('Secret', name, causes);
}

/** Decodes, checks and merges `data` and `stringData` into the stored `data`. */
function normalize(name: string, obj: IncomingObject): IncomingObject {
  const data = (obj.data ?? {}) as Record<string, unknown>;
  const stringData = (obj.stringData ?? {}) as Record<string, unknown>;
  if (typeof data !== 'object' || Array.isArray(data) || typeof stringData !== 'object' || Array.isArray(stringData)) {
    throw badRequest(
      'Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal into Go struct field Secret.data of type map[string][]uint8',
    );
  }
  const merged: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) {
    if (typeof v !== 'string')
      throw badRequest(
        `Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal ${typeof v} into Go struct field Secret.data of type []uint8`,
      );
    const at = base64ErrorOffset(v);
    if (at >= 0) throw badRequest(`Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte ${at}`);
    // Stored canonically (Go re-encodes the decoded bytes).
    merged[k] = Buffer.from(v.replace(/[\r\n]/g, ''), 'base64').toString('base64');
  }
  for (const [k, v] of Object.entries(stringData)) {
    if (typeof v !== 'string')
      throw badRequest(
        `Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal ${typeof v} into Go struct field Secret.stringData of type string`,
      );
    merged[k] = Buffer.from(v, 'utf8').toString('base64');
  }
  checkKeys(name, 'data', Object.keys(merged));
  const size = Object.entries(merged).reduce((n, [k, v]) => n + k.length + Buffer.from(v, 'base64').length, 0);
  if (size > MAX_SECRET_BYTES)
    throw invalid('Secret', name, [{ field: 'data', message: `Too long: must have at most ${MAX_SECRET_BYTES} bytes`, reason: 'FieldValueTooLong' }]);
  const { stringData: _dropped, ...rest } = obj;
  return {
    ...rest,
    type: typeof obj.type === 'string' && obj.type !== '' ? obj.type : 'Opaque',
    ...(Object.keys(merged).length ? { data: merged } : { data: undefined }),
  };
}

function clean(o: IncomingObject): IncomingObject {
  if (o.data === undefined) delete o.data;
  return o;
}

export const secretRules: KindRules = {
  kind: 'Secret',
  plural: 'secrets',
  deleteReturnsStatus: true,
  onCreate(name, obj) {
    validateSubdomainName('Secret', name);
    return clean(normalize(name, obj));
  },
  onUpdate(name, cur: FakeObject, obj) {
    const next = clean(normalize(name, obj));
    if (next.type !== cur.type) throw invalid('Secret', name, [{ field: 'type', message: `Invalid value: "${String(next.type)}": field is immutable` }]);
    if (cur.immutable === true) {
      const same = canonical(next.data ?? {}) === canonical(cur.data ?? {}) && next.immutable === true;
      if (!same)
        throw invalid('Secret', name, [{ field: 'data', message: 'Forbidden: field is immutable when `immutable` is set', reason: 'FieldValueForbidden' }]);
    }
    return next;
  },
};
