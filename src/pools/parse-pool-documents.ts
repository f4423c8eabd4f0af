import { EgressError } from '../errors.ts';
import { poolDocumentSchema, type PoolDocument } from '../model/pool-resource.ts';
import {
  capped,
  checkProvider,
  documentList,
  MAX_DOCUMENTS,
  rawAt,
  textAt,
  validateNumberedDocuments,
  yamlValues,
  type DocumentKind,
} from '../proxies/parse-documents.ts';

/** A ProxyPool document set rejected whole; every error names its document and field (the first 20, then a count). */
export class InvalidPoolDocumentsError extends EgressError {
  readonly errors: string[];
  constructor(errors: readonly string[]) {
    const lines = capped(errors);
    super('ERR_INVALID_POOL', `rejected, nothing applied: ${lines.join('; ')}`);
    this.errors = lines;
  }
}

export interface PoolDocumentOptions {
  /** The configured providers: a template or spread entry naming another is an error too. */
  providers?: readonly string[];
}

function poolKind(options: PoolDocumentOptions): DocumentKind<PoolDocument> {
  return {
    kind: 'ProxyPool',
    schema: poolDocumentSchema,
    check: (doc, problem) => {
      const template = doc.spec.template.spec.provider;
      if (template !== undefined) checkProvider(options.providers, template, 'spec.template.spec.provider', problem);
      for (const [i, entry] of (doc.spec.spread ?? []).entries()) checkProvider(options.providers, entry.provider, `spec.spread[${i}].provider`, problem);
    },
    checkRefused: (value, problem) => {
      const template = textAt(value, ['spec', 'template', 'spec', 'provider']);
      if (template !== undefined) checkProvider(options.providers, template, 'spec.template.spec.provider', problem);
      const spread = rawAt(value, ['spec', 'spread']);
      for (const [i, entry] of (Array.isArray(spread) ? spread : []).entries()) {
        const provider = textAt(entry, ['provider']);
        if (provider !== undefined) checkProvider(options.providers, provider, `spec.spread[${i}].provider`, problem);
      }
    },
    invalid: (errors) => new InvalidPoolDocumentsError(errors),
  };
}

function validateNumbered(docs: readonly { value: unknown; number: number }[], options: PoolDocumentOptions): PoolDocument[] {
  return validateNumberedDocuments(docs, poolKind(options));
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
