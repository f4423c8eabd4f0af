import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { providerSchema, type ProviderConfig } from './providers.ts';
import { formatPath } from './zod-helpers.ts';

/** The YAML configuration file: the providers, nothing else yet. */
export const configFileSchema = z
  .strictObject({
    providers: z.array(providerSchema).default([]),
  })
  .superRefine((file, ctx) => {
    const seen = new Map<string, number>();
    file.providers.forEach((p, i) => {
      const first = seen.get(p.name);
      if (first !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['providers', i, 'name'], message: `duplicate provider name "${p.name}" (also providers[${first}])` });
      } else seen.set(p.name, i);
    });
  });

export interface ConfigFile {
  providers: ProviderConfig[];
}

/** The configuration `egress up` uses when no file is given: the local provider alone. */
export const DEFAULT_CONFIG_FILE: ConfigFile = { providers: [{ name: 'local', type: 'local' }] };

function issueMessage(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type') return `expected ${issue.expected === 'int' ? 'an integer' : `a ${issue.expected}`}`;
  if (issue.code === 'unrecognized_keys') return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  if (issue.code === 'invalid_union' && issue.discriminator) {
    // A discriminated union (the providers' `type`, or one nested in a provider) names its own key and values.
    const options = 'options' in issue && issue.options ? issue.options.map(String) : [];
    return options.length > 0 ? `expected ${issue.discriminator} to be one of ${options.join(', ')}` : `unexpected value of ${issue.discriminator}`;
  }
  return issue.message;
}

/** Validates a parsed document; the first error names its path (`providers[1].hosts[0].port: expected a number`). */
export function parseConfigDocument(doc: unknown, source: string): ConfigFile {
  const result = configFileSchema.safeParse(doc ?? {});
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => {
    const path = formatPath(issue.path);
    return `${path ? `${path}: ` : ''}${issueMessage(issue)}`;
  });
  const first = result.error.issues[0];
  throw new ConfigError(
    source,
    issues.length === 1 ? (issues[0] ?? 'invalid') : `${issues[0]} (and ${issues.length - 1} more: ${issues.slice(1).join('; ')})`,
    { cause: first },
  );
}

/** Reads and validates a YAML configuration file. */
export async function loadConfigFile(path: string): Promise<ConfigFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(path, `cannot read the configuration file: ${(err as Error).message}`, { cause: err });
  }
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) {
    const err = doc.errors[0];
    throw new ConfigError(path, `not valid YAML: ${err?.message.split('\n')[0] ?? 'parse error'}`, { cause: err });
  }
  return parseConfigDocument(doc.toJS(), path);
}
