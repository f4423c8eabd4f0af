import { parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import { EgressError } from '../errors.ts';
import { formatPath } from '../config/zod-helpers.ts';
import { proxyDocumentSchema, type ProxyDocument } from './resource.ts';

/** At most this many error lines are reported; the rest are counted in one more line. */
export const MAX_ERROR_LINES = 20;
/** At most this many documents in one request or file. */
export const MAX_DOCUMENTS = 1000;

function capped(errors: readonly string[]): string[] {
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

function describe(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type') return `expected ${issue.expected === 'int' ? 'an integer' : `a ${issue.expected}`}`;
  if (issue.code === 'unrecognized_keys') return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  return issue.message;
}

/**
 * Validates one or many Proxy documents: a single object, a list, `{items: [...]}`, or (from
 * YAML text) several `---`-separated documents. All or nothing: any error rejects the whole set.
 */
export function validateProxyDocuments(input: unknown): ProxyDocument[] {
  const docs: unknown[] = Array.isArray(input)
    ? input
    : input && typeof input === 'object' && 'items' in input && Array.isArray(input.items)
      ? (input as { items: unknown[] }).items
      : [input];
  if (docs.length > MAX_DOCUMENTS) throw new InvalidProxyDocumentsError([`${docs.length} documents: at most ${MAX_DOCUMENTS} are accepted at once`]);
  const errors: string[] = [];
  const parsed: ProxyDocument[] = [];
  const seen = new Map<string, number>();
  docs.forEach((doc, i) => {
    const prefix = docs.length > 1 ? `documents[${i}]` : '';
    const result = proxyDocumentSchema.safeParse(doc);
    if (!result.success) {
      for (const issue of result.error.issues) {
        const path = formatPath(issue.path);
        errors.push(`${[prefix, path].filter(Boolean).join('.')}: ${describe(issue)}`);
      }
      return;
    }
    const first = seen.get(result.data.metadata.name);
    if (first !== undefined) errors.push(`${prefix}.metadata.name: "${result.data.metadata.name}" appears twice (also documents[${first}])`);
    seen.set(result.data.metadata.name, i);
    parsed.push(result.data);
  });
  if (docs.length === 0) errors.push('no Proxy documents');
  if (errors.length > 0) throw new InvalidProxyDocumentsError(errors);
  return parsed;
}

function firstLine(message: string): string {
  return (message.split('\n')[0] ?? '').slice(0, 300);
}

/**
 * Parses YAML (one or many documents) or JSON text, then validates it. Malformed YAML, an alias
 * to nothing (`x: *nope`) or too many aliases (the library's `maxAliasCount`, against "billion
 * laughs") are errors naming the document, never exceptions.
 */
export function parseProxyDocuments(text: string): ProxyDocument[] {
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  if (list.length > MAX_DOCUMENTS) throw new InvalidProxyDocumentsError([`${list.length} YAML documents: at most ${MAX_DOCUMENTS} are accepted at once`]);
  const values: unknown[] = [];
  for (const [i, d] of list.entries()) {
    if (d.errors.length > 0) throw new InvalidProxyDocumentsError([`document ${i}: not valid YAML: ${firstLine(d.errors[0]?.message ?? '')}`]);
    let value: unknown;
    try {
      value = d.toJS();
    } catch (err) {
      throw new InvalidProxyDocumentsError([`document ${i}: not valid YAML: ${firstLine(err instanceof Error ? err.message : String(err))}`]);
    }
    if (value !== null && value !== undefined) values.push(value);
  }
  return validateProxyDocuments(values.length === 1 ? values[0] : values);
}
