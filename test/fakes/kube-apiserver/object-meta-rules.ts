/**
 * The object-metadata rules a real kube-apiserver applies to every write, as field errors for its 422
 * Invalid answer (worded as Kubernetes 1.32 words them):
 * - label keys: an optional prefix (a DNS-1123 subdomain of at most 253 characters) and `/`, then a
 *   name of at most 63 characters, alphanumeric at both ends, `-`, `_` and `.` inside;
 * - label values: empty, or at most 63 characters, alphanumeric at both ends, `-`, `_` and `.` inside;
 * - a custom resource's `metadata.name` (and `generateName`) held to the restrictions its CRD's
 *   schema puts on them (`maxLength`, `pattern`…), which the rest of the schema check leaves out.
 * The RFC 1123 name rule of each kind is in resource-store.ts (`checkName`).
 */
import { validate, type FieldError, type Schema } from './structural-schema.ts';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

const QUALIFIED_NAME_MSG =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const PREFIX_MSG =
  "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_VALUE_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/** What is wrong with a label key (a qualified name), in the real server's words; empty when valid. */
export function labelKeyProblems(key: string): string[] {
  const parts = key.split('/');
  let name = key;
  const problems: string[] = [];
  if (parts.length === 2) {
    const [prefix = '', rest = ''] = parts;
    name = rest;
    if (prefix.length === 0) problems.push('prefix part must be non-empty');
    else {
      if (prefix.length > 253) problems.push('prefix part must be no more than 253 bytes');
      if (!DNS_SUBDOMAIN.test(prefix)) problems.push(PREFIX_MSG);
    }
  } else if (parts.length > 2) {
    return [
      "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  }
  if (name.length === 0) problems.push('name part must be non-empty');
  else {
    if (name.length > 63) problems.push('name part must be no more than 63 bytes');
    if (!QUALIFIED_NAME.test(name)) problems.push(QUALIFIED_NAME_MSG);
  }
  return problems;
}

/** What is wrong with a label value, in the real server's words; empty when valid. */
export function labelValueProblems(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 63) problems.push('must be no more than 63 bytes');
  if (!LABEL_VALUE.test(value)) problems.push(LABEL_VALUE_MSG);
  return problems;
}

/** The field errors of `metadata.labels` (each key, then its value), as ValidateLabels gives them. */
export function labelErrors(labels: unknown): FieldError[] {
  if (labels === undefined || labels === null) return [];
  if (typeof labels !== 'object' || Array.isArray(labels)) {
    return [{ reason: 'FieldValueInvalid', field: 'metadata.labels', message: 'Invalid value: "labels": must be a map of strings' }];
  }
  const errors: FieldError[] = [];
  for (const [key, value] of Object.entries(labels as Record<string, unknown>)) {
    for (const p of labelKeyProblems(key)) errors.push({ reason: 'FieldValueInvalid', field: 'metadata.labels', message: `Invalid value: "${key}": ${p}` });
    if (typeof value !== 'string') {
      errors.push({ reason: 'FieldValueInvalid', field: 'metadata.labels', message: `Invalid value: "${key}": label values must be strings` });
      continue;
    }
    for (const p of labelValueProblems(value))
      errors.push({ reason: 'FieldValueInvalid', field: 'metadata.labels', message: `Invalid value: "${value}": ${p}` });
  }
  return errors;
}

/**
 * The errors of `metadata.name` and `metadata.generateName` against the restrictions a CRD's schema
 * puts on them (the only metadata fields a structural schema may restrict).
 */
export function schemaMetadataErrors(metadata: unknown, metadataSchema: Schema | undefined): FieldError[] {
  const props = metadataSchema?.properties;
  if (!props || typeof metadata !== 'object' || metadata === null) return [];
  const meta = metadata as Record<string, unknown>;
  const errors: FieldError[] = [];
  for (const field of ['name', 'generateName'] as const) {
    const schema = props[field];
    if (schema && meta[field] !== undefined) errors.push(...validate(meta[field], schema, `metadata.${field}`));
  }
  return errors;
}
