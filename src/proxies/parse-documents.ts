import { parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import { EgressError } from '../errors.ts';
import { formatPath } from '../config/zod-helpers.ts';
import { proxyDocumentSchema, type ProxyDocument } from './resource.ts';

/** A document set that was rejected whole; every error names its document and field. */
export class InvalidProxyDocumentsError extends EgressError {
  readonly errors: string[];
  constructor(errors: string[]) {
    super('ERR_INVALID_PROXY', `rejected, nothing applied: ${errors.join('; ')}`);
    this.errors = errors;
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

/** Parses YAML (one or many documents) or JSON text, then validates it. */
export function parseProxyDocuments(text: string): ProxyDocument[] {
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  const values: unknown[] = [];
  for (const [i, d] of list.entries()) {
    if (d.errors.length > 0) throw new InvalidProxyDocumentsError([`document ${i}: not valid YAML: ${d.errors[0]?.message.split('\n')[0] ?? ''}`]);
    const value: unknown = d.toJS();
    if (value !== null && value !== undefined) values.push(value);
  }
  return validateProxyDocuments(values.length === 1 ? values[0] : values);
}
