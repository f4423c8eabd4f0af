import { EgressError } from '../errors.ts';
import { poolDocumentSchema, type PoolDocument } from '../model/pool-resource.ts';
import { documentList, documentName, located, MAX_DOCUMENTS, MAX_ERROR_LINES, yamlValues } from '../proxies/parse-documents.ts';
import { safeParseWorded } from '../schema/zod-helpers.ts';

/** A ProxyPool document set rejected whole; every error names its document and field (the first 20, then a count). */
export class InvalidPoolDocumentsError extends EgressError {
  readonly errors: string[];
  constructor(errors: readonly string[]) {
    const lines =
      errors.length <= MAX_ERROR_LINES ? [...errors] : [...errors.slice(0, MAX_ERROR_LINES), `… and ${errors.length - MAX_ERROR_LINES} more errors`];
    super('ERR_INVALID_POOL', `rejected, nothing applied: ${lines.join('; ')}`);
    this.errors = lines;
  }
}

export interface PoolDocumentOptions {
  /** The configured providers: a template or spread entry naming another is an error too. */
  providers?: readonly string[];
}

function validateNumbered(docs: readonly { value: unknown; number: number }[], options: PoolDocumentOptions): PoolDocument[] {
  const several = docs.length > 1;
  const errors: string[] = [];
  const parsed: PoolDocument[] = [];
  const seen = new Map<string, number>();
  for (const { value, number } of docs) {
    const result = safeParseWorded(poolDocumentSchema, value);
    if (!result.ok) {
      for (const line of result.lines) errors.push(several ? `${documentName(number)}: ${line}` : line);
      continue;
    }
    const doc = result.data;
    const first = seen.get(doc.metadata.name);
    if (first !== undefined) errors.push(located(number, several, 'metadata.name', `"${doc.metadata.name}" appears twice (also ${documentName(first)})`));
    else seen.set(doc.metadata.name, number);
    const providers = options.providers;
    if (providers) {
      const unknown = (path: string, provider: string): void => {
        if (!providers.includes(provider))
          errors.push(located(number, several, path, `"${provider}" is not a configured provider (configured: ${providers.join(', ') || 'none'})`));
      };
      const template = doc.spec.template.spec.provider;
      if (template !== undefined) unknown('spec.template.spec.provider', template);
      for (const [i, entry] of (doc.spec.spread ?? []).entries()) unknown(`spec.spread[${i}].provider`, entry.provider);
    }
    parsed.push(doc);
  }
  if (docs.length === 0) errors.push('no ProxyPool documents');
  if (errors.length > 0) throw new InvalidPoolDocumentsError(errors);
  return parsed;
}

/** Validates one or many ProxyPool documents: an object, a list, or `{items: [...]}`; all or nothing. */
export function validatePoolDocuments(input: unknown, options: PoolDocumentOptions = {}): PoolDocument[] {
  const docs = documentList(input);
  if (docs.length > MAX_DOCUMENTS) throw new InvalidPoolDocumentsError([`${docs.length} documents: at most ${MAX_DOCUMENTS} are accepted at once`]);
  return validateNumbered(
    docs.map((value, i) => ({ value, number: i + 1 })),
    options,
  );
}

/** Parses YAML (one or many documents) or JSON text, then validates it (see parseProxyDocuments). */
export function parsePoolDocuments(text: string, options: PoolDocumentOptions = {}): PoolDocument[] {
  const read = yamlValues(text, (lines) => new InvalidPoolDocumentsError(lines));
  return read.kind === 'set' ? validatePoolDocuments(read.value, options) : validateNumbered(read.values, options);
}
