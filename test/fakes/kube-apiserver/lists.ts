/** List semantics of the fake apiserver: selectors, `limit`, opaque `continue`, `remainingItemCount`. */
import type { FakePod } from './pod-store.ts';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector, SelectorError } from './selectors.ts';
import { badRequest, status, StatusError } from './status.ts';

export const POD_FIELDS = ['metadata.name', 'metadata.namespace', 'status.phase', 'spec.nodeName', 'spec.restartPolicy'] as const;

interface ContinueToken {
  /** Epoch of the fake's continue tokens; `expireContinueTokens()` bumps it to force 410. */
  e: number;
  /** Resource version of the first page. */
  rv: string;
  /** Key (namespace/name) of the last item served. */
  k: string;
}

export function encodeContinue(t: ContinueToken): string {
  return Buffer.from(JSON.stringify(t)).toString('base64url');
}

function decodeContinue(token: string): ContinueToken {
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as ContinueToken;
    if (typeof t.e !== 'number' || typeof t.rv !== 'string' || typeof t.k !== 'string') throw new Error('shape');
    return t;
  } catch {
    throw badRequest('continue key is not valid: illegal base64 data or incorrect format');
  }
}

const EXPIRED_MESSAGE =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.';

export interface ListParams {
  labelSelector?: string;
  fieldSelector?: string;
  limit?: string;
  continue?: string;
}

export interface PodList {
  kind: 'PodList';
  apiVersion: 'v1';
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: unknown[];
}

function podField(p: FakePod, field: string): string {
  switch (field) {
    case 'metadata.name':
      return p.metadata.name;
    case 'metadata.namespace':
      return p.metadata.namespace;
    case 'status.phase':
      return p.status.phase ?? '';
    case 'spec.nodeName':
      return p.spec.nodeName ?? '';
    case 'spec.restartPolicy':
      return typeof p.spec.restartPolicy === 'string' ? p.spec.restartPolicy : '';
    default:
      return '';
  }
}

/** A predicate for the label and field selectors of a list or watch; a bad selector throws 400. */
export function podFilter(labelSelector = '', fieldSelector = ''): { match: (p: FakePod) => boolean; filtered: boolean } {
  try {
    const labels = parseLabelSelector(labelSelector);
    const fields = parseFieldSelector(fieldSelector, POD_FIELDS);
    return {
      match: (p) => matchesLabels(labels, p.metadata.labels) && matchesFields(fields, (f) => podField(p, f)),
      filtered: labels.length > 0 || fields.length > 0,
    };
  } catch (e) {
    if (e instanceof SelectorError) throw badRequest(e.message);
    throw e;
  }
}

/** Builds one page of a PodList from `all` (already in key order). */
export function listPods(all: FakePod[], q: ListParams, currentRv: string, epoch: number): PodList {
  return listObjects('PodList', all, q, currentRv, epoch, (p, f) => podField(p, f), POD_FIELDS) as PodList;
}

export interface ObjectList {
  kind: string;
  apiVersion: 'v1';
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: unknown[];
}

/** The field selectors every kind supports. */
export const OBJECT_FIELDS = ['metadata.name', 'metadata.namespace'] as const;

type Listable = { apiVersion?: string; kind?: string; metadata: { name: string; namespace: string; labels?: Record<string, string> } };

/** Builds one page of a `<Kind>List` from `all` (already in key order), with selectors, `limit` and `continue`. */
export function listObjects<T extends Listable>(
  listKind: string,
  all: T[],
  q: ListParams,
  currentRv: string,
  epoch: number,
  field: (o: T, f: string) => string = (o, f) => (f === 'metadata.name' ? o.metadata.name : f === 'metadata.namespace' ? o.metadata.namespace : ''),
  supported: readonly string[] = OBJECT_FIELDS,
): ObjectList {
  let match: (o: T) => boolean;
  let filtered: boolean;
  try {
    const labels = parseLabelSelector(q.labelSelector ?? '');
    const fields = parseFieldSelector(q.fieldSelector ?? '', supported);
    match = (o) => matchesLabels(labels, o.metadata.labels) && matchesFields(fields, (f) => field(o, f));
    filtered = labels.length > 0 || fields.length > 0;
  } catch (e) {
    if (e instanceof SelectorError) throw badRequest(e.message);
    throw e;
  }
  let limit = 0;
  if (q.limit !== undefined && q.limit !== '') {
    if (!/^-?\d+$/.test(q.limit)) throw badRequest(`limit: Invalid value: "${q.limit}": must be an integer`);
    limit = Math.max(0, Number(q.limit));
  }
  let rv = currentRv;
  let after: string | undefined;
  if (q.continue) {
    const t = decodeContinue(q.continue);
    if (t.e !== epoch) throw new StatusError(status(410, 'Expired', EXPIRED_MESSAGE));
    rv = t.rv;
    after = t.k;
  }
  const key = (o: T): string => `${o.metadata.namespace}/${o.metadata.name}`;
  const selected = all.filter((o) => (after === undefined || key(o) > after) && match(o));
  const page = limit > 0 ? selected.slice(0, limit) : selected;
  const list: ObjectList = { kind: listKind, apiVersion: 'v1', metadata: { resourceVersion: rv }, items: [] };
  if (limit > 0 && selected.length > limit) {
    list.metadata.continue = encodeContinue({ e: epoch, rv, k: key(page[page.length - 1]!) });
    // The real server cannot count what a selector would keep, so it omits the count for filtered lists.
    if (!filtered) list.metadata.remainingItemCount = selected.length - limit;
  }
  // Items in a list carry no apiVersion/kind on the wire, as with the real server.
  list.items = page.map(({ apiVersion: _a, kind: _k, ...rest }) => rest);
  return list;
}
