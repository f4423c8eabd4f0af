/**
 * Patch bodies as the apiserver applies them to a Pod (as plain JSON):
 * - `application/merge-patch+json` (RFC 7386: objects merge, `null` deletes, lists are replaced wholesale);
 * - `application/strategic-merge-patch+json`: treated as a merge patch (deviation: no list merge keys);
 * - `application/apply-patch+yaml` (JSON body): a recursive merge; `fieldManager` is required;
 * - `application/json-patch+json` (RFC 6902: add, remove, replace, move, copy, test).
 * Errors are Status objects: 400 for a malformed body, 422 for a failed `test`, 415 for other types.
 */
import { badRequest, status, StatusError } from './status.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const isObject = (v: unknown): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, Json> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k] ?? null, v);
  }
  return out;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw badRequest(`invalid JSON pointer "${path}"`);
  return path
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function parentOf(doc: Json, parts: string[]): [Json, string] {
  let cur: Json = doc;
  for (const p of parts.slice(0, -1)) {
    const next: Json | undefined = Array.isArray(cur) ? cur[Number(p)] : isObject(cur) ? cur[p] : undefined;
    if (next === undefined) throw new StatusError(status(422, 'Invalid', `doc is missing path: "/${parts.join('/')}"`));
    cur = next;
  }
  return [cur, parts[parts.length - 1] ?? ''];
}

function getAt(doc: Json, parts: string[]): Json | undefined {
  if (parts.length === 0) return doc;
  const [parent, key] = parentOf(doc, parts);
  return Array.isArray(parent) ? parent[Number(key)] : isObject(parent) ? parent[key] : undefined;
}

function removeAt(doc: Json, parts: string[]): Json {
  const [parent, key] = parentOf(doc, parts);
  if (Array.isArray(parent)) {
    const i = Number(key);
    if (!(i >= 0 && i < parent.length)) throw new StatusError(status(422, 'Invalid', `unable to remove nonexistent key: ${key}`));
    return parent.splice(i, 1)[0]!;
  }
  if (!isObject(parent) || !(key in parent)) throw new StatusError(status(422, 'Invalid', `unable to remove nonexistent key: ${key}`));
  const v = parent[key]!;
  delete parent[key];
  return v;
}

function addAt(doc: Json, parts: string[], value: Json, replace: boolean): void {
  const [parent, key] = parentOf(doc, parts);
  if (Array.isArray(parent)) {
    const i = key === '-' ? parent.length : Number(key);
    if (!(i >= 0 && i <= parent.length)) throw new StatusError(status(422, 'Invalid', `index out of range: ${key}`));
    if (replace) parent[i] = value;
    else parent.splice(i, 0, value);
  } else if (isObject(parent)) {
    if (replace && !(key in parent)) throw new StatusError(status(422, 'Invalid', `replace operation does not apply: doc is missing key: /${parts.join('/')}`));
    parent[key] = value;
  } else {
    throw new StatusError(status(422, 'Invalid', `doc is missing path: "/${parts.join('/')}"`));
  }
}

export function jsonPatch(target: Json, ops: unknown): Json {
  if (!Array.isArray(ops)) throw badRequest('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  const doc = structuredClone(target);
  for (const raw of ops as Record<string, Json>[]) {
    const op = raw.op;
    const parts = pointer(typeof raw.path === 'string' ? raw.path : '');
    if (parts.length === 0) throw badRequest('patches on the whole document are not supported');
    switch (op) {
      case 'add':
      case 'replace':
        addAt(doc, parts, structuredClone(raw.value ?? null), op === 'replace');
        break;
      case 'remove':
        removeAt(doc, parts);
        break;
      case 'move':
      case 'copy': {
        const from = pointer(typeof raw.from === 'string' ? raw.from : '');
        const v = op === 'move' ? removeAt(doc, from) : structuredClone(getAt(doc, from) ?? null);
        addAt(doc, parts, v, false);
        break;
      }
      case 'test':
        if (JSON.stringify(getAt(doc, parts)) !== JSON.stringify(raw.value)) {
          throw new StatusError(
            status(422, 'Invalid', `the server rejected our request due to an error in our request: testing value /${parts.join('/')} failed`),
          );
        }
        break;
      default:
        throw badRequest(`Unexpected kind: ${JSON.stringify(op)}`);
    }
  }
  return doc;
}

/** Applies a patch body of the given content type; `fieldManager` matters for server-side apply. */
export function applyPatch(target: Json, contentType: string | undefined, body: string, fieldManager: string | undefined): Json {
  const type = (contentType ?? '').split(';')[0]!.trim();
  const supported = ['application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/json-patch+json', 'application/apply-patch+yaml'];
  if (!supported.includes(type)) {
    throw new StatusError(
      status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: ${supported.join(', ')}`),
    );
  }
  if (type === 'application/apply-patch+yaml' && !fieldManager) {
    throw badRequest('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw badRequest('error decoding patch: invalid JSON (the fake accepts JSON bodies only, also for apply)');
  }
  if (type === 'application/json-patch+json') return jsonPatch(target, parsed);
  if (!isObject(parsed)) throw badRequest('json: cannot unmarshal array into Go value of type map[string]interface {}');
  return mergePatch(target, parsed);
}
