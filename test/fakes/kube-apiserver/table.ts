/**
 * Server-side printing: a `meta.k8s.io/v1` Table for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`,
 * built from a CRD's `additionalPrinterColumns` (Name first; Name and Age when the CRD declares none, and for
 * the built-in kinds stored generically). Cells of `date` columns are ages as the real server renders them
 * (`5m`, `3h12m`, `2d`); a path that finds nothing gives a null cell (kubectl prints `<none>`). Rows carry the
 * object as `includeObject` asks (default: PartialObjectMetadata).
 */
import type { PrinterColumn, StoredObject } from './resource-types.ts';

export interface TableColumn {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

const NAME_COLUMN: TableColumn = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description:
    'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  priority: 0,
};
const AGE_COLUMN: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description:
    'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
};

/** True when the Accept header asks for a meta.k8s.io/v1 Table. */
export function wantsTable(accept: string | undefined): boolean {
  return (accept ?? '').split(',').some((p) => /;\s*as=Table/.test(p) && /;\s*g=meta\.k8s\.io/.test(p) && /;\s*v=v1(;|$|\s)/.test(p + ';'));
}

/** Go's duration.HumanDuration, as `date` cells are rendered. */
export function humanDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < -1) return '<invalid>';
  if (s < 0) return '0s';
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (h < 24 * 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (h < 24 * 365 * 2) return `${d}d`;
  const y = Math.floor(d / 365);
  if (h < 24 * 365 * 8) return d % 365 === 0 ? `${y}y` : `${y}y${d % 365}d`;
  return `${y}y`;
}

type Step = { key: string } | { index: number } | { filter: string[]; op: '==' | '!='; value: string } | { all: true };

/** Parses the JSONPath subset CRD printer columns use: `.a.b`, `['a']`, `[0]`, `[*]`, `[?(@.type=="Ready")]`. */
function parsePath(path: string): Step[] {
  const steps: Step[] = [];
  let rest = path.trim().replace(/^\{|\}$/g, '');
  while (rest.length > 0) {
    let m: RegExpMatchArray | null;
    if ((m = rest.match(/^\.([A-Za-z0-9_-]+)/))) steps.push({ key: m[1]! });
    else if ((m = rest.match(/^\[(\d+)\]/))) steps.push({ index: Number(m[1]) });
    else if ((m = rest.match(/^\[\*\]/))) steps.push({ all: true });
    else if ((m = rest.match(/^\['([^']*)'\]/))) steps.push({ key: m[1]! });
    else if ((m = rest.match(/^\[\?\(@((?:\.[A-Za-z0-9_-]+)+)\s*(==|!=)\s*(?:"([^"]*)"|'([^']*)')\)\]/))) {
      steps.push({ filter: m[1]!.slice(1).split('.'), op: m[2] as '==' | '!=', value: m[3] ?? m[4] ?? '' });
    } else throw new Error(`unsupported JSONPath ${path}`);
    rest = rest.slice(m[0].length);
  }
  return steps;
}

/** Every value `path` selects in `obj`. */
export function jsonPath(obj: unknown, path: string): unknown[] {
  let cur: unknown[] = [obj];
  for (const step of parsePath(path)) {
    const next: unknown[] = [];
    for (const v of cur) {
      if ('key' in step) {
        if (v && typeof v === 'object' && !Array.isArray(v) && (v as Record<string, unknown>)[step.key] !== undefined)
          next.push((v as Record<string, unknown>)[step.key]);
      } else if ('index' in step) {
        if (Array.isArray(v) && v[step.index] !== undefined) next.push(v[step.index]);
      } else if ('all' in step) {
        if (Array.isArray(v)) next.push(...(v as unknown[]));
      } else if (Array.isArray(v)) {
        for (const item of v as unknown[]) {
          let field: unknown = item;
          for (const k of step.filter) field = field && typeof field === 'object' ? (field as Record<string, unknown>)[k] : undefined;
          const text = typeof field === 'string' ? field : JSON.stringify(field);
          if ((text === step.value) === (step.op === '==')) next.push(item);
        }
      }
    }
    cur = next;
  }
  return cur;
}

function cell(column: PrinterColumn, obj: StoredObject, nowMs: number): unknown {
  const found = jsonPath(obj, column.jsonPath);
  if (found.length === 0 || found[0] === undefined || found[0] === null) return null;
  const v = found[0];
  switch (column.type) {
    case 'date':
      return typeof v === 'string' ? (Number.isNaN(Date.parse(v)) ? '<invalid>' : humanDuration(nowMs - Date.parse(v))) : null;
    case 'integer':
      return typeof v === 'number' ? Math.trunc(v) : null;
    case 'number':
      return typeof v === 'number' ? v : null;
    case 'boolean':
      return typeof v === 'boolean' ? v : null;
    default:
      return found.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))).join(' ');
  }
}

export interface TableOptions {
  columns: PrinterColumn[] | undefined;
  includeObject: string | undefined;
  /** Leave the column definitions out (watch events after the first). */
  noHeaders?: boolean;
  metadata?: Record<string, unknown>;
}

/** A Table of `objects` (each row's object per `includeObject`: None, Metadata (default) or Object). */
export function toTable(objects: StoredObject[], opts: TableOptions): Record<string, unknown> {
  const columns = opts.columns && opts.columns.length > 0 ? opts.columns : [AGE_COLUMN];
  const nowMs = Date.now();
  const definitions: TableColumn[] = [
    NAME_COLUMN,
    ...columns.map((c) => ({ name: c.name, type: c.type, format: c.format ?? '', description: c.description ?? '', priority: c.priority ?? 0 })),
  ];
  const rowObject = (o: StoredObject): unknown => {
    if (opts.includeObject === 'None') return undefined;
    if (opts.includeObject === 'Object') return o;
    return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
  };
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: opts.metadata ?? {},
    ...(opts.noHeaders ? {} : { columnDefinitions: definitions }),
    rows: objects.map((o) => ({ cells: [o.metadata.name, ...columns.map((c) => cell(c, o, nowMs))], object: rowObject(o) })),
  };
}
