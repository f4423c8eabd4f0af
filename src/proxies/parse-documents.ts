import { parseAllDocuments } from 'yaml';
import { yamlNestingExceeds } from './yaml-nesting.ts';
import type { z } from 'zod';
import { EgressError } from '../errors.ts';
import { safeParseWorded } from '../schema/zod-helpers.ts';
import { proxyDocumentSchema, type ProxyDocument } from '../model/proxy-resource.ts';
import { POOL_LABEL } from '../model/pool-resource.ts';

/** At most this many error lines are reported; the rest are counted in one more line. */
export const MAX_ERROR_LINES = 20;
/** At most this many documents in one request or file. */
export const MAX_DOCUMENTS = 1000;

export function capped(errors: readonly string[]): string[] {
  if (errors.length <= MAX_ERROR_LINES) return [...errors];
  return [...errors.slice(0, MAX_ERROR_LINES), `… and ${errors.length - MAX_ERROR_LINES} more errors`];
}

/** A document set that was rejected whole; every error names its document and field (the first 20, then a count). */
export class InvalidProxyDocumentsError extends EgressError {
  readonly errors: string[];
  constructor(errors: readonly string[]) {
    const lines = capped(errors);
    super('ERR_INVALID_PROXY', `rejected, nothing applied: ${lines.join('; ')}`);
    this.errors = lines;
  }
}

export interface ProxyDocumentOptions {
  /** The configured providers: a document naming another is an error too. */
  providers?: readonly string[];
}

/** A document as messages name it: `document 2` (counted from 1, as a reader counts them). */
export function documentName(number: number): string {
  return `document ${number}`;
}

/** `document 2: spec.provider: …` in a set of several; just `spec.provider: …` for a single document. */
export function located(number: number, several: boolean, path: string, message: string): string {
  return [several ? documentName(number) : '', path].filter(Boolean).join(': ') + `: ${message}`;
}

/** How one kind of document is validated: its schema, its own checks, its error. */
export interface DocumentKind<T extends { metadata: { name: string } }> {
  /** `Proxy`, `ProxyPool`: in "no Proxy documents". */
  kind: string;
  schema: z.ZodType<T>;
  /** Checks beyond the schema; `problem(path, message)` reports one. */
  check?: (doc: T, problem: (path: string, message: string) => void) => void;
  /**
   * The checks that can still run on a document the schema refused, on its raw value (a field
   * that is there and of the right type), so that one answer lists every error of the set.
   */
  checkRefused?: (value: unknown, problem: (path: string, message: string) => void) => void;
  invalid: (errors: readonly string[]) => Error;
}

/**
 * Validates documents numbered as the user wrote them, all or nothing: every error of every
 * document (schema, duplicate names, the kind's own checks), each naming its document and field.
 */
export function validateNumberedDocuments<T extends { metadata: { name: string } }>(
  docs: readonly { value: unknown; number: number }[],
  kind: DocumentKind<T>,
): T[] {
  const several = docs.length > 1;
  const errors: string[] = [];
  const parsed: T[] = [];
  const seen = new Map<string, number>();
  for (const { value, number } of docs) {
    const result = safeParseWorded(kind.schema, value);
    if (!result.ok) {
      for (const line of result.lines) errors.push(several ? `${documentName(number)}: ${line}` : line);
      kind.checkRefused?.(value, (path, message) => errors.push(located(number, several, path, message)));
      continue;
    }
    const doc = result.data;
    const first = seen.get(doc.metadata.name);
    if (first !== undefined) errors.push(located(number, several, 'metadata.name', `"${doc.metadata.name}" appears twice (also ${documentName(first)})`));
    else seen.set(doc.metadata.name, number);
    kind.check?.(doc, (path, message) => errors.push(located(number, several, path, message)));
    parsed.push(doc);
  }
  if (docs.length === 0) errors.push(`no ${kind.kind} documents`);
  if (errors.length > 0) throw kind.invalid(errors);
  return parsed;
}

/** The value at `path` of a raw document, when it is there and of the type asked for. */
export function rawAt(value: unknown, path: readonly (string | number)[]): unknown {
  let at = value;
  for (const key of path) {
    if (typeof at !== 'object' || at === null) return undefined;
    at = (at as Record<string | number, unknown>)[key];
  }
  return at;
}

/** The text at `path` of a raw document, when there is one. */
export function textAt(value: unknown, path: readonly (string | number)[]): string | undefined {
  const at = rawAt(value, path);
  return typeof at === 'string' ? at : undefined;
}

/** A provider name checked against the configured ones (when known). */
export function checkProvider(
  providers: readonly string[] | undefined,
  provider: string,
  path: string,
  problem: (path: string, message: string) => void,
): void {
  if (providers && !providers.includes(provider)) problem(path, `"${provider}" is not a configured provider (configured: ${providers.join(', ') || 'none'})`);
}

function proxyKind(options: ProxyDocumentOptions): DocumentKind<ProxyDocument> {
  return {
    kind: 'Proxy',
    schema: proxyDocumentSchema,
    check: (doc, problem) => {
      if (doc.metadata.labels[POOL_LABEL] !== undefined)
        problem(`metadata.labels.${POOL_LABEL}`, 'is set only by a ProxyPool on its members; apply a ProxyPool instead');
      checkProvider(options.providers, doc.spec.provider, 'spec.provider', problem);
    },
    checkRefused: (value, problem) => {
      const provider = textAt(value, ['spec', 'provider']);
      if (provider !== undefined) checkProvider(options.providers, provider, 'spec.provider', problem);
    },
    invalid: (errors) => new InvalidProxyDocumentsError(errors),
  };
}

function validateNumbered(docs: readonly { value: unknown; number: number }[], options: ProxyDocumentOptions): ProxyDocument[] {
  return validateNumberedDocuments(docs, proxyKind(options));
}

/**
 * Validates one or many Proxy documents: a single object, a list, or `{items: [...]}`. All or
 * nothing: any error rejects the whole set. Documents are numbered from 1 in messages.
 */
export function validateProxyDocuments(input: unknown, options: ProxyDocumentOptions = {}): ProxyDocument[] {
  const docs = documentList(input);
  if (docs.length > MAX_DOCUMENTS) throw new InvalidProxyDocumentsError([`${docs.length} documents: at most ${MAX_DOCUMENTS} are accepted at once`]);
  return validateNumbered(
    docs.map((value, i) => ({ value, number: i + 1 })),
    options,
  );
}

function firstLine(message: string): string {
  return (message.split('\n')[0] ?? '').replace(/:\s*$/, '').slice(0, 300);
}

/** How deeply a YAML body may nest collections (a Proxy or ProxyPool document needs fewer than ten). */
export const MAX_NESTING = 64;

/** The values of a YAML text, numbered by their place in it; or, for one document holding a list or `{items}`, that set. */
export type YamlValues = { kind: 'numbered'; values: { value: unknown; number: number }[] } | { kind: 'set'; value: unknown };

/**
 * Splits YAML (one or many documents) or JSON text into values numbered from 1 by their place in
 * the text (an empty one, such as after a trailing `---`, still counts). Malformed YAML, an alias
 * to nothing (`x: *nope`) or too many aliases (the library's `maxAliasCount`, against "billion
 * laughs") become `fail(lines)` naming the document, never exceptions of the library; a text nested
 * deeper than MAX_NESTING is refused before the library sees it (yaml-nesting.ts).
 */
export function yamlValues(text: string, fail: (lines: string[]) => Error): YamlValues {
  if (yamlNestingExceeds(text, MAX_NESTING)) throw fail([`the YAML nests collections deeper than ${MAX_NESTING} levels: no document of ours does`]);
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  if (list.length > MAX_DOCUMENTS) throw fail([`${list.length} YAML documents: at most ${MAX_DOCUMENTS} are accepted at once`]);
  const several = list.length > 1;
  const notYaml = (number: number, message: string): Error => fail([`${several ? `${documentName(number)}: ` : ''}not valid YAML: ${firstLine(message)}`]);
  const values: { value: unknown; number: number }[] = [];
  for (const [i, d] of list.entries()) {
    if (d.errors.length > 0) throw notYaml(i + 1, d.errors[0]?.message ?? '');
    let value: unknown;
    try {
      value = d.toJS();
    } catch (err) {
      throw notYaml(i + 1, err instanceof Error ? err.message : String(err));
    }
    if (value !== null && value !== undefined) values.push({ value, number: i + 1 });
  }
  // One document holding a list or `{items}` is a set of its own (numbered within it).
  const only = values.length === 1 ? values[0]?.value : undefined;
  if (only !== undefined && (Array.isArray(only) || (typeof only === 'object' && only !== null && 'items' in only))) return { kind: 'set', value: only };
  return { kind: 'numbered', values };
}

/** A JSON value as a list of documents: a list, `{items: [...]}`, or one document. */
export function documentList(input: unknown): unknown[] {
  return Array.isArray(input)
    ? input
    : input && typeof input === 'object' && 'items' in input && Array.isArray(input.items)
      ? (input as { items: unknown[] }).items
      : [input];
}

/** Parses YAML (one or many documents) or JSON text (see `yamlValues`), then validates it. */
export function parseProxyDocuments(text: string, options: ProxyDocumentOptions = {}): ProxyDocument[] {
  const read = yamlValues(text, (lines) => new InvalidProxyDocumentsError(lines));
  return read.kind === 'set' ? validateProxyDocuments(read.value, options) : validateNumbered(read.values, options);
}
