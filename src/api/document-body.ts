import type { Context } from 'hono';
import { BadRequestError } from './http-errors.ts';

/**
 * Reads an apply request's documents: a JSON body (`content-type` naming json) through
 * `fromValue`, anything else as YAML text through `fromText`. Malformed JSON is a 400 naming it.
 */
export async function readDocumentBody<T>(c: Context, fromValue: (value: unknown) => T[], fromText: (text: string) => T[]): Promise<T[]> {
  const type = c.req.header('content-type') ?? '';
  const text = await c.req.text();
  if (!type.includes('json')) return fromText(text);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new BadRequestError(`the body is not valid JSON: ${(err as Error).message}`);
  }
  return fromValue(value);
}
