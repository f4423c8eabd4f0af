import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { providerSchema, type ProviderConfig } from '../providers/config.ts';
import { safeParseWorded } from '../schema/zod-helpers.ts';
import { priceTableSchema, usageSectionSchema, type PriceTable, type UsageSettings } from './usage-config.ts';

/** The YAML configuration file: the providers, and optionally the price table and what usage accounting keeps. */
export const configFileSchema = z
  .strictObject({
    // Required: an empty file, or one that forgets the key, must not silently mean "no providers"
    // (a scheduler given none removes every provider's schedules and health). `providers: []` says it.
    providers: z.array(providerSchema, {
      error: (issue) => (issue.input === undefined ? 'required: list the providers, or write "providers: []" to run with none' : undefined),
    }),
    /** Prices of instances, egress, vendors and IPv4 addresses (docs/usage.md); absent: every cost is 0. */
    prices: priceTableSchema.optional(),
    /** What usage accounting keeps (docs/usage.md). */
    usage: usageSectionSchema.optional(),
  })
  .superRefine((file, ctx) => {
    const seen = new Map<string, number>();
    file.providers.forEach((p, i) => {
      const first = seen.get(p.name);
      if (first !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['providers', i, 'name'], message: `duplicate provider name "${p.name}" (also providers[${first}])` });
      } else seen.set(p.name, i);
    });
    for (const section of ['instanceHour', 'egressGB', 'vendorGB', 'ipv4Hour'] as const) {
      for (const provider of Object.keys(file.prices?.[section] ?? {})) {
        if (!seen.has(provider)) ctx.addIssue({ code: 'custom', path: ['prices', section, provider], message: `no provider is named "${provider}"` });
      }
    }
  });

export interface ConfigFile {
  providers: ProviderConfig[];
  prices?: PriceTable | undefined;
  usage?: UsageSettings | undefined;
}

/** The configuration `egress up` uses when no file is given: the local provider alone. */
export const DEFAULT_CONFIG_FILE: ConfigFile = { providers: [{ name: 'local', type: 'local' }] };

/** Validates a parsed document; the first error names its path (`providers[1].hosts[0].port: expected a number, got "22x"`). */
export function parseConfigDocument(doc: unknown, source: string): ConfigFile {
  if (doc === null || doc === undefined) {
    throw new ConfigError(source, 'the configuration file is empty: list the providers, or write "providers: []" to run with none');
  }
  const result = safeParseWorded(configFileSchema, doc);
  if (result.ok) return result.data;
  const issues = result.lines;
  throw new ConfigError(
    source,
    issues.length === 1 ? (issues[0] ?? 'invalid') : `${issues[0]} (and ${issues.length - 1} more: ${issues.slice(1).join('; ')})`,
    { cause: result.error.issues[0] },
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
  return parseConfigDocument(parseYaml(text, path), path);
}

/** Aliases a document may use before it counts as a resource-exhaustion attempt (the `yaml` library's own default). */
const MAX_ALIAS_COUNT = 100;

/**
 * YAML text → plain data. Every failure — syntax, an undefined alias, too many aliases, anything
 * `toJS` throws — is a ConfigError naming the file, so the CLI exits 2 with `<file>: not valid YAML: …`.
 */
export function parseYaml(text: string, source: string): unknown {
  const invalid = (message: string, cause: unknown): ConfigError =>
    new ConfigError(source, `not valid YAML: ${(message.split('\n')[0] ?? 'parse error').replace(/:\s*$/, '')}`, { cause });
  let doc: ReturnType<typeof parseDocument>;
  try {
    doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  } catch (err) {
    throw invalid((err as Error).message, err);
  }
  const first = doc.errors[0];
  if (first) throw invalid(first.message, first);
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (err) {
    const message = (err as Error).message;
    throw invalid(/resource exhaustion/i.test(message) ? `more than ${MAX_ALIAS_COUNT} aliases (${message})` : message, err);
  }
}
