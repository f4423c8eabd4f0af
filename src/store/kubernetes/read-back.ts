import { z } from 'zod';
import type { Logger } from '../../logging.ts';
import { issueLines, projectErrorMap } from '../../schema/zod-helpers.ts';

/*
 * What the Kubernetes stores read back from the API server (get, list, watch) is a peer's word:
 * anyone who may write the custom resources (or a CRD installed without our schema) can put anything
 * in them. Every spec and status read back passes the API's own schemas (src/crds/resources.ts)
 * before the domain sees it, and the times in it are checked against this process's clock.
 */

/**
 * How far another process's clock may run ahead of this one's. Every writer of ours stamps times
 * with its own clock (the publisher clamps a check's time to it), so a time read back that is later
 * than now + MAX_CLOCK_SKEW_MS was not written by any of them honestly: it is forged or corrupt.
 */
export const MAX_CLOCK_SKEW_MS = 5_000;

export type ReadBack<T> = { ok: true; value: T } | { ok: false; problems: string[] };

/** Reads one part of an object read back; `problems` are `<part>.<field>: <what is wrong>` lines (at most MAX_PROBLEMS). */
export type PartReader<T> = (value: unknown) => ReadBack<T>;

type Issue = z.core.$ZodIssue;

/** The problems of one part reported at most; the rest are counted on a last line. */
export const MAX_PROBLEMS = 10;

function problemLines(error: z.core.$ZodError): string[] {
  const lines = issueLines(error);
  return lines.length <= MAX_PROBLEMS ? lines : [...lines.slice(0, MAX_PROBLEMS), `and ${lines.length - MAX_PROBLEMS} more`];
}

/** A copy of `input` without the keys that `unrecognized_keys` issues name. */
function withoutKeys(input: unknown, issues: readonly Issue[]): unknown {
  const copy = structuredClone(input);
  for (const issue of issues) {
    if (issue.code !== 'unrecognized_keys') continue;
    let at: unknown = copy;
    for (const key of issue.path) at = at !== null && typeof at === 'object' ? (at as Record<PropertyKey, unknown>)[key] : undefined;
    if (at === null || typeof at !== 'object') continue;
    for (const key of issue.keys) delete (at as Record<string, unknown>)[key];
  }
  return copy;
}

/**
 * A reader of one part (`spec`, `status`) of the objects read back, with the API's schema for it:
 * what it returns is the schema's output (defaults applied), and each problem names the field as
 * users write it (`spec.placement: expected a string, got an object`).
 *
 * Keys the schema does not know are left out rather than refused: a newer release may write fields
 * this one does not know yet (the API server prunes any that its CRD does not declare), and that must
 * not make this release distrust the whole object during a rolling upgrade.
 */
export function partReader<S extends z.ZodType>(part: string, schema: S): PartReader<z.output<S>> {
  const wrapped = z.object({ [part]: schema });
  return (value) => {
    let input: unknown = { [part]: value };
    for (let pass = 0; ; pass++) {
      const result = wrapped.safeParse(input, { error: projectErrorMap, reportInput: true });
      if (result.success) return { ok: true, value: (result.data as Record<string, z.output<S>>)[part] as z.output<S> };
      const unknown = result.error.issues.filter((i) => i.code === 'unrecognized_keys');
      if (unknown.length === 0 || pass >= 3) return { ok: false, problems: problemLines(result.error) };
      input = withoutKeys(input, unknown);
    }
  };
}

/**
 * The fields of a spec that broke its schema left out: each field of `value` that passes its own
 * schema in `shape` is kept, the rest come from `fallback` (the required ones) or are left out. For
 * what reads a spec that failed (a listing, GC, discovery), never for acting on it: the object
 * carries its `specProblems`, and its reconcile refuses it.
 */
export function fieldsThatPass<T extends object>(shape: Readonly<Record<string, z.ZodType>>, value: unknown, fallback: T): T {
  const out = { ...fallback } as Record<string, unknown>;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return out as T;
  for (const [key, schema] of Object.entries(shape)) {
    const field = (value as Record<string, unknown>)[key];
    if (field === undefined) continue;
    const parsed = schema.safeParse(field);
    if (parsed.success && parsed.data !== undefined) out[key] = parsed.data;
  }
  return out as T;
}

/** True when `iso` is later than `now` by more than MAX_CLOCK_SKEW_MS. */
export function beyondSkew(iso: string, now: Date): boolean {
  return Date.parse(iso) > now.getTime() + MAX_CLOCK_SKEW_MS;
}

/** `iso`, or `now` when `iso` lies further in the future than the skew allows. */
export function clampTime(iso: string, now: Date): string {
  return beyondSkew(iso, now) ? now.toISOString() : iso;
}

/** The conditions with each `lastTransitionTime` beyond the skew clamped to `now`. */
export function clampConditions<C extends { lastTransitionTime: string }>(conditions: readonly C[], now: Date): C[] {
  return conditions.map((c) => (beyondSkew(c.lastTransitionTime, now) ? { ...c, lastTransitionTime: now.toISOString() } : c));
}

/** How many reports ReadBackLog remembers having made; the oldest are forgotten first. */
const REMEMBERED = 1_000;

/**
 * Logs each object read back that was not taken as it is (a spec that fails its schema, a status
 * dropped, times clamped), once per version of the object: lists run at every scrape and every
 * resync, and one forged object must not fill the log.
 */
export class ReadBackLog {
  readonly #logger: Logger | undefined;
  readonly #seen = new Set<string>();

  constructor(logger: Logger | undefined) {
    this.#logger = logger;
  }

  report(kind: string, meta: { name: string; resourceVersion?: string }, what: string, problems: readonly string[]): void {
    if (!this.#logger) return;
    const key = `${kind}\0${meta.name}\0${meta.resourceVersion ?? ''}\0${what}`;
    if (this.#seen.has(key)) return;
    this.#seen.add(key);
    if (this.#seen.size > REMEMBERED) {
      const oldest = this.#seen.values().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
    this.#logger.warn(
      { kind, name: meta.name, resourceVersion: meta.resourceVersion, problems },
      `${kind} "${meta.name}" read back from the API server: ${what}`,
    );
  }
}

/** What reading an object back needs: this process's clock, and where to say what was not taken as it is. */
export interface ReadContext {
  now: Date;
  log?: ReadBackLog;
}

/** What the Kubernetes stores take besides the connection: the clock read-back times are checked against, and where objects not taken as they are get logged. */
export interface KubernetesStoreOptions {
  now?: () => Date;
  logger?: Logger;
}
