import { z } from 'zod';
import { cidrSchema, type ProxyEgressPolicy } from './policy-config.ts';

/**
 * Reads the JSON document a proxy instance receives (ProxyEgressPolicy, version 1), from a file
 * or the `EGRESS_PROXY_POLICY` environment variable. Keys it does not know are ignored (a newer
 * orchestrator may add some); a wrong version or a malformed range rejects the whole document.
 */
const hostSchema = z.string().min(1).max(253);
const portSchema = z.number().int().min(1).max(65535);

const documentSchema = z.object({
  version: z.literal(1),
  allow: z.array(cidrSchema).max(256).default([]),
  deny: z.array(cidrSchema).max(256).default([]),
  guarded: z.array(z.object({ host: hostSchema, port: portSchema, role: z.enum(['api', 'metrics', 'redis', 'proxy']) })).max(64).default([]),
  echo: z.object({ host: hostSchema, port: portSchema, path: z.string().startsWith('/').max(2048) }).optional(),
});

/** The document was not valid; `message` names the field. */
export class PolicyDocumentError extends Error {
  override name = 'PolicyDocumentError';
}

export function parsePolicyDocument(text: string): ProxyEgressPolicy {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new PolicyDocumentError(`egress policy is not JSON: ${(err as Error).message}`);
  }
  const parsed = documentSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new PolicyDocumentError(`egress policy ${issue?.path.join('.') || '(document)'}: ${issue?.message ?? 'invalid'}`);
  }
  const { echo, ...rest } = parsed.data;
  return { ...rest, ...(echo ? { echo } : {}) };
}
