/** Request routing and handlers of the fake Compute API (see server.ts for the scope and deviations). */
import { randomBytes } from 'node:crypto';
import { computeError, invalid, notFound } from './errors.ts';
import { FilterError, matchesFilter, parseFilter, type Filter } from './filter.ts';
import { deleteFirewall, getFirewall, insertFirewall, listFirewalls, patchFirewall } from './firewalls.ts';
import { INSTANCE_ACTIONS, instanceAction, type InstanceAction } from './instance-actions.ts';
import type { ComputeRequest } from './types.ts';
import { fakeMetadata, type ComputeState, type FakeInstance } from './state.ts';

const NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const LABEL_KEY = /^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}$/u;
const LABEL_VALUE = /^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$/u;
const MAX_RESULTS = 500;

type Result = [number, unknown];

export function route(state: ComputeState, e: ComputeRequest, project: string): Result {
  const parts = e.path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] !== 'compute' || parts[1] !== 'v1' || parts[2] !== 'projects' || !parts[3]) throw notFound(e.path);
  const p = parts[3];
  const rest = parts.slice(4);
  const last = rest[rest.length - 1];
  const collection = last === 'instances' || last === 'operations' || last === 'firewalls';
  const verb =
    e.method === 'DELETE'
      ? 'delete'
      : e.method === 'PATCH'
        ? 'update'
        : e.method === 'GET'
          ? collection
            ? 'list'
            : 'get'
          : collection
            ? 'create'
            : (last ?? 'get');
  const resource = rest.includes('firewalls') ? 'firewalls' : 'instances';
  if (p !== project) {
    throw computeError(403, 'forbidden', `Required 'compute.${resource}.${verb}' permission for 'projects/${p}'`);
  }
  if (rest[0] === 'aggregated' && rest[1] === 'instances' && rest.length === 2 && e.method === 'GET') {
    return aggregatedList(state, e);
  }
  if (rest[0] === 'global') return globalRoute(state, e, p, rest);
  if (rest[0] !== 'zones' || !rest[1]) throw notFound(`projects/${p}/${rest.join('/')}`);
  const zone = rest[1];
  if (!state.zones.includes(zone)) throw notFound(`projects/${p}/zones/${zone}`);
  const [kind, name, action] = rest.slice(2);
  if (kind === 'instances') {
    if (name === undefined) {
      if (e.method === 'GET') return zonalList(state, e, zone);
      if (e.method === 'POST') return insert(state, e, zone);
    } else if (action === undefined) {
      if (e.method === 'GET') return [200, instanceOr404(state, p, zone, name)];
      if (e.method === 'DELETE') return [200, instanceAction(state, p, zone, name, 'delete')];
    } else if (e.method === 'POST' && INSTANCE_ACTIONS.includes(action) && rest.length === 5) {
      return [200, instanceAction(state, p, zone, name, action as InstanceAction)];
    } else if (e.method === 'POST' && action === 'setLabels' && rest.length === 5) {
      return setLabels(state, e, p, zone, name);
    } else if (e.method === 'POST' && action === 'setMetadata' && rest.length === 5) {
      return setMetadata(state, e, p, zone, name);
    }
  }
  if (kind === 'operations' && name !== undefined) {
    const isWait = action === 'wait' && e.method === 'POST' && rest.length === 5;
    if ((action === undefined && e.method === 'GET') || isWait) {
      const op = state.poll(zone, name);
      if (!op) throw notFound(`projects/${p}/zones/${zone}/operations/${name}`);
      return [200, op];
    }
  }
  throw notFound(`projects/${p}/${rest.join('/')}`);
}

/** `global/firewalls[/name]` and `global/operations/name[/wait]`. */
function globalRoute(state: ComputeState, e: ComputeRequest, p: string, rest: string[]): Result {
  const [, kind, name, action] = rest;
  if (kind === 'firewalls' && rest.length <= 3) {
    if (name === undefined) {
      if (e.method === 'GET') return [200, listFirewalls(state)];
      if (e.method === 'POST') return [200, insertFirewall(state, e.body)];
    } else {
      if (e.method === 'GET') return [200, getFirewall(state, name)];
      if (e.method === 'PATCH') return [200, patchFirewall(state, name, e.body)];
      if (e.method === 'DELETE') return [200, deleteFirewall(state, name)];
    }
  }
  if (kind === 'operations' && name !== undefined) {
    const isWait = action === 'wait' && e.method === 'POST' && rest.length === 4;
    if ((action === undefined && e.method === 'GET') || isWait) {
      const op = state.poll(undefined, name);
      if (!op) throw notFound(`projects/${p}/global/operations/${name}`);
      return [200, op];
    }
  }
  throw notFound(`projects/${p}/${rest.join('/')}`);
}

function instanceOr404(state: ComputeState, p: string, zone: string, name: string): FakeInstance {
  const i = state.instances.get(state.key(zone, name));
  if (!i) throw notFound(`projects/${p}/zones/${zone}/instances/${name}`);
  return structuredClone(i);
}

interface Page {
  filter: Filter;
  offset: number;
  max: number;
}

function pageParams(e: ComputeRequest): Page & { token: (offset: number) => string } {
  const rawFilter = e.query.filter ?? '';
  let filter: Filter;
  try {
    filter = parseFilter(rawFilter);
  } catch (err) {
    if (err instanceof FilterError) throw invalid('filter', rawFilter, 'Invalid list filter expression.');
    throw err;
  }
  let max = MAX_RESULTS;
  if (e.query.maxResults !== undefined) {
    max = Number(e.query.maxResults);
    if (!Number.isInteger(max) || max < 0) throw invalid('maxResults', e.query.maxResults, 'Must be a non-negative integer.');
    if (max > MAX_RESULTS) throw invalid('maxResults', e.query.maxResults, `Must be less than or equal to ${MAX_RESULTS}`);
    if (max === 0) max = MAX_RESULTS;
  }
  let offset = 0;
  if (e.query.pageToken) {
    try {
      const t = JSON.parse(Buffer.from(e.query.pageToken, 'base64url').toString('utf8')) as { o: number; f: string };
      if (typeof t.o !== 'number' || t.f !== rawFilter) throw new Error('mismatch');
      offset = t.o;
    } catch {
      throw invalid('pageToken', e.query.pageToken, 'Invalid page token.');
    }
  }
  return { filter, offset, max, token: (o) => Buffer.from(JSON.stringify({ o, f: rawFilter })).toString('base64url') };
}

function select(all: FakeInstance[], e: ComputeRequest): { page: FakeInstance[]; next?: string } {
  const { filter, offset, max, token } = pageParams(e);
  const matching = all.filter((i) => matchesFilter(filter, i));
  const page = matching.slice(offset, offset + max).map((i) => structuredClone(i));
  return offset + max < matching.length ? { page, next: token(offset + max) } : { page };
}

function aggregatedList(state: ComputeState, e: ComputeRequest): Result {
  // gax sends `true`, gcloud (apitools) `True`.
  const partial = e.query.returnPartialSuccess?.toLowerCase() === 'true';
  if (state.unreachableZones.size > 0 && !partial) {
    throw computeError(503, 'backendError', `Zones are unreachable: ${[...state.unreachableZones].join(', ')}`);
  }
  const reachable = state.zones.filter((z) => !state.unreachableZones.has(z));
  const { page, next } = select(
    reachable.flatMap((z) => state.list(z)),
    e,
  );
  const items: Record<string, unknown> = {};
  for (const zone of reachable) {
    const here = page.filter((i) => i.zone.endsWith(`/zones/${zone}`));
    items[`zones/${zone}`] = here.length
      ? { instances: here }
      : {
          warning: {
            code: 'NO_RESULTS_ON_PAGE',
            message: `There are no results for scope 'zones/${zone}' on this page.`,
            data: [{ key: 'scope', value: `zones/${zone}` }],
          },
        };
  }
  const base = `${state.base}/compute/v1/projects/${state.project}/aggregated/instances`;
  const unreachables = state.zones.filter((z) => state.unreachableZones.has(z)).map((z) => `zones/${z}`);
  return [
    200,
    {
      kind: 'compute#instanceAggregatedList',
      id: `projects/${state.project}/aggregated/instances`,
      items,
      ...(next ? { nextPageToken: next } : {}),
      selfLink: base,
      ...(unreachables.length ? { unreachables } : {}),
    },
  ];
}

function zonalList(state: ComputeState, e: ComputeRequest, zone: string): Result {
  const { page, next } = select(state.list(zone), e);
  return [
    200,
    {
      kind: 'compute#instanceList',
      id: `projects/${state.project}/zones/${zone}/instances`,
      ...(page.length ? { items: page } : {}),
      ...(next ? { nextPageToken: next } : {}),
      selfLink: `${state.zoneUrl(zone)}/instances`,
    },
  ];
}

const requestIds = new WeakMap<ComputeState, Map<string, unknown>>();

function insert(state: ComputeState, e: ComputeRequest, zone: string): Result {
  const ids = requestIds.get(state) ?? new Map<string, unknown>();
  requestIds.set(state, ids);
  const rid = e.query.requestId;
  if (rid && ids.has(rid)) return [200, ids.get(rid)];
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(e.body) as Record<string, unknown>;
  } catch {
    throw computeError(400, 'parseError', 'This API does not support parsing form-encoded input.');
  }
  const name = typeof body.name === 'string' ? body.name : '';
  if (!name) throw computeError(400, 'required', "Required field 'resource.name' not specified");
  if (!NAME.test(name)) throw invalid('resource.name', name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'");
  // With an instance template the machine type may come from the template.
  if (!body.machineType && !e.query.sourceInstanceTemplate) throw computeError(400, 'required', "Required field 'resource.machineType' not specified");
  checkLabels((body.labels ?? {}) as Record<string, unknown>);
  checkMetadataItems((body.metadata as { items?: unknown } | undefined)?.items);
  if (state.instances.has(state.key(zone, name))) {
    throw computeError(409, 'alreadyExists', `The resource 'projects/${state.project}/zones/${zone}/instances/${name}' already exists`);
  }
  const inst = state.build(zone, body);
  state.instances.set(state.key(zone, name), inst);
  const op = state.startOperation(zone, 'insert', inst, () => {
    inst.status = 'RUNNING';
  });
  if (rid) ids.set(rid, op);
  return [200, op];
}

/** setLabels: the fingerprint is a precondition (412 conditionNotMet when stale); labels change when the op completes. */
function setLabels(state: ComputeState, e: ComputeRequest, p: string, zone: string, name: string): Result {
  const inst = state.instances.get(state.key(zone, name));
  if (!inst) throw notFound(`projects/${p}/zones/${zone}/instances/${name}`);
  let body: { labels?: Record<string, string>; labelFingerprint?: string };
  try {
    body = JSON.parse(e.body) as typeof body;
  } catch {
    throw computeError(400, 'parseError', 'Invalid JSON payload received.');
  }
  if (!body.labelFingerprint) throw computeError(400, 'required', "Required field 'labelFingerprint' not specified");
  // A fingerprint is bytes: clients may send it in either base64 alphabet (gcloud re-encodes it URL-safe).
  if (!Buffer.from(body.labelFingerprint, 'base64').equals(Buffer.from(inst.labelFingerprint, 'base64'))) {
    throw computeError(412, 'conditionNotMet', 'Labels fingerprint either invalid or resource labels have changed', { status: 'FAILED_PRECONDITION' });
  }
  const labels = body.labels ?? {};
  checkLabels(labels);
  return [
    200,
    state.startOperation(zone, 'setLabels', inst, () => {
      inst.labels = { ...labels };
      inst.labelFingerprint = randomBytes(8).toString('base64');
    }),
  ];
}

/**
 * setMetadata: replaces all items. The metadata fingerprint is a precondition (412 conditionNotMet when
 * missing or stale); items and fingerprint change when the op completes.
 */
function setMetadata(state: ComputeState, e: ComputeRequest, p: string, zone: string, name: string): Result {
  const inst = state.instances.get(state.key(zone, name));
  if (!inst) throw notFound(`projects/${p}/zones/${zone}/instances/${name}`);
  let body: { items?: unknown; fingerprint?: string };
  try {
    body = JSON.parse(e.body) as typeof body;
  } catch {
    throw computeError(400, 'parseError', 'Invalid JSON payload received.');
  }
  if (!body.fingerprint || !Buffer.from(body.fingerprint, 'base64').equals(Buffer.from(inst.metadata.fingerprint, 'base64'))) {
    throw computeError(412, 'conditionNotMet', 'Supplied fingerprint does not match current metadata fingerprint.', { status: 'FAILED_PRECONDITION' });
  }
  const items = checkMetadataItems(body.items);
  return [
    200,
    state.startOperation(zone, 'setMetadata', inst, () => {
      inst.metadata = fakeMetadata(items);
    }),
  ];
}

const METADATA_KEY = /^[a-zA-Z0-9-_]{1,128}$/;
const METADATA_VALUE_MAX = 256 * 1024;
const METADATA_TOTAL_MAX = 512 * 1024;

/** The real limits: keys `[a-zA-Z0-9-_]{1,128}`, unique; a value at most 256 KB; all of them at most 512 KB. */
function checkMetadataItems(raw: unknown): { key: string; value: string }[] {
  const items = (Array.isArray(raw) ? raw : []) as { key?: unknown; value?: unknown }[];
  const seen = new Set<string>();
  let total = 0;
  for (const [i, item] of items.entries()) {
    const key = typeof item.key === 'string' ? item.key : '';
    const value = typeof item.value === 'string' ? item.value : '';
    if (!METADATA_KEY.test(key)) throw invalid(`metadata.items[${i}].key`, key, "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'");
    if (seen.has(key)) throw computeError(400, 'invalid', `Invalid value for field 'metadata.items[${i}].key': '${key}'. Duplicate keys are not allowed.`);
    seen.add(key);
    const size = Buffer.byteLength(value, 'utf8');
    if (size > METADATA_VALUE_MAX)
      throw invalid(`metadata.items[${i}].value`, `${value.slice(0, 32)}…`, `Metadata value must be at most ${METADATA_VALUE_MAX} bytes.`);
    total += Buffer.byteLength(key, 'utf8') + size;
  }
  if (total > METADATA_TOTAL_MAX) throw computeError(400, 'invalid', `Metadata exceeds the total size limit of ${METADATA_TOTAL_MAX} bytes.`);
  return items.map((i) => ({ key: String(i.key), value: typeof i.value === 'string' ? i.value : '' }));
}

function checkLabels(labels: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(labels)) {
    if (!LABEL_KEY.test(k))
      throw invalid(`labels`, k, 'Label keys must start with a lowercase letter and contain only lowercase letters, digits, underscores and dashes (max 63).');
    if (typeof v !== 'string' || !LABEL_VALUE.test(v))
      throw invalid(`labels.${k}`, String(v), 'Label values may contain only lowercase letters, digits, underscores and dashes (max 63).');
  }
}
