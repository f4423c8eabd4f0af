/**
 * The long-running commands' flags, declared once: one zod schema per flag, its default taken from
 * SERVER_FLAG_DEFAULTS (the one table of defaults, which `egress --help` reads without loading zod),
 * its refusal worded as users read it (`--port: expected an integer from 0 to 65535, got "x"`).
 * What a flag means alone is checked here; what flags mean together is flag-rules.ts, what files
 * they name hold is flag-files.ts, and server-config.ts puts the AppConfig together.
 */
import { z } from 'zod';
import { QUEUE_SET, type WorkQueue } from '../config/app.ts';
import { resolveCheckSchedule, type CheckSchedule } from '../config/checks.ts';
import { ConfigError } from '../errors.ts';
import { parseAuthority } from '../http/host-authority.ts';
import { MAX_GC_DELETES_PER_SECOND } from '../providers/gc-settings.ts';
import { LOG_FORMATS } from '../pretty-log.ts';
import { parseByteSize } from '../schema/byte-size.ts';
import { parseDuration } from '../schema/duration.ts';
import { projectErrorMap } from '../schema/zod-helpers.ts';
import type { OtelEnv } from '../telemetry/config.ts';
import { SERVER_FLAG_DEFAULTS as d } from './server-flag-defaults.ts';

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
const DAY_MS = 86_400_000;

/** A flag's text turned into its value by `parse`; `undefined` refuses it with `refusal(text)`. */
function flagValue<T>(parse: (text: string) => T | undefined, refusal: (text: string) => string) {
  return z.string().transform((text, ctx) => {
    const value = parse(text);
    if (value !== undefined) return value;
    ctx.addIssue({ code: 'custom', message: refusal(text) });
    return z.NEVER;
  });
}

/** A flag's text checked by `check`, which answers the refusal (or nothing: accepted as it is). */
function checkedText(check: (text: string) => string | undefined) {
  return flagValue(
    (text) => (check(text) === undefined ? text : undefined),
    (text) => check(text) ?? '',
  );
}

const within = (n: number | undefined, min: number, max: number): number | undefined => (n !== undefined && n >= min && n <= max ? n : undefined);

const integer = (min: number, max: number) =>
  flagValue(
    (text) => (Number.isInteger(Number(text)) ? within(Number(text), min, max) : undefined),
    (text) => `expected an integer from ${min} to ${max}, got "${text}"`,
  );

const positiveDuration = flagValue(
  (text) => within(parseDuration(text), 1, Infinity),
  (text) => `expected a positive duration such as 30s, got "${text}"`,
);

const nonNegativeDuration = flagValue(
  (text) => within(parseDuration(text), 0, Infinity),
  (text) => `expected a duration such as 5m (0 for off), got "${text}"`,
);

/** A duration from `min` to `max` milliseconds; the refusal names the range in `words`. */
const boundedDuration = (min: number, max: number, words: string) =>
  flagValue(
    (text) => within(parseDuration(text), min, max),
    (text) => `expected a duration from ${words}, got "${text}"`,
  );

/** A number from `min` (or above it, `exclusiveMin`) to `max`, fractions allowed; blank text is no number. */
const rate = (min: number, max: number, exclusiveMin: boolean, refusal: (text: string) => string) =>
  flagValue((text) => {
    const n = Number(text);
    if (text.trim() === '' || !Number.isFinite(n) || n > max || (exclusiveMin ? n <= min : n < min)) return undefined;
    return n;
  }, refusal);

const httpUrl = flagValue(
  (text) => (URL.canParse(text) && /^https?:$/.test(new URL(text).protocol) ? text : undefined),
  (text) => `expected an http:// or https:// URL, got "${text}"`,
);

/** `REDIS_URL` (or `--redis-url`): redis:// or rediss://; empty is none. */
const redisUrl = z
  .string()
  .optional()
  .transform((text, ctx) => {
    if (text === undefined || text === '') return undefined;
    if (!URL.canParse(text)) {
      ctx.addIssue({ code: 'custom', message: `not a URL: "${text}"` });
      return z.NEVER;
    }
    const { protocol } = new URL(text);
    if (protocol !== 'redis:' && protocol !== 'rediss:') {
      ctx.addIssue({ code: 'custom', message: `expected redis:// or rediss://, got "${protocol}"` });
      return z.NEVER;
    }
    return text;
  });

const CLUSTER_NODE = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/@]+):(\d{1,5})$/;

/** `host:port,host:port,…` (IPv6 as `[::1]:7000`) of `--redis-cluster-nodes`; empty is none. */
const clusterNodes = z
  .string()
  .optional()
  .transform((text, ctx) => {
    if (text === undefined || text === '') return undefined;
    const items = text
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (items.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'expected host:port,… (at least one node)' });
      return z.NEVER;
    }
    const nodes: { host: string; port: number }[] = [];
    for (const item of items) {
      const m = CLUSTER_NODE.exec(item);
      const port = Number(m?.[2]);
      if (!m?.[1] || !Number.isInteger(port) || port < 1 || port > 65535) {
        ctx.addIssue({ code: 'custom', message: `expected host:port (port 1-65535, IPv6 as [::1]:7000), got "${item}"` });
        return z.NEVER;
      }
      nodes.push({ host: m[1].replace(/^\[|\]$/g, ''), port });
    }
    return nodes;
  });

/** `--queues`: known queue names, comma-separated, each once. */
const queues = z
  .string()
  .prefault(d.queues)
  .transform((text, ctx) => {
    const names = text
      .split(',')
      .map((q) => q.trim())
      .filter(Boolean);
    const unknown = names.find((q) => !(QUEUE_SET as readonly string[]).includes(q));
    if (names.length === 0 || unknown !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: unknown === undefined ? 'expected at least one queue' : `unknown queue "${unknown}" (known: ${QUEUE_SET.join(', ')})`,
      });
      return z.NEVER;
    }
    return [...new Set(names)] as WorkQueue[];
  });

/** `--allowed-host` values: a host name or address, optionally with a port (`egress.local`, `egress.local:8080`, `[::1]:8080`). */
const allowedHosts = z.array(
  checkedText((text) =>
    parseAuthority(text) ? undefined : `expected a host name or address with an optional port (egress.local, egress.local:8080), got "${text}"`,
  ),
);

const optionalText = z.string().optional();
const optionalSwitch = z.boolean().optional();

/** The provider-check pair: the seed's rules (config/checks.ts) read them before any other flag. */
const CHECK_FLAGS = z.object({
  providerCheckInterval: z.string().prefault(d.providerCheckInterval),
  providerCheckTimeout: z.string().prefault(d.providerCheckTimeout),
});

/** Every other flag, in the order their mistakes are reported. Keys are commander's option names. */
const SERVER_FLAGS = z.object({
  port: integer(0, 65535).prefault(d.port),
  logLevel: checkedText((text) => (LOG_LEVELS.includes(text) ? undefined : `expected one of ${LOG_LEVELS.join(', ')}, got "${text}"`)).prefault(d.logLevel),
  logFormat: checkedText((text) =>
    (LOG_FORMATS as readonly string[]).includes(text) ? undefined : `expected one of ${LOG_FORMATS.join(', ')}, got "${text}"`,
  ).prefault(d.logFormat),
  prefix: checkedText((text) =>
    /^\{[^{}]+\}/.test(text) ? undefined : `must start with a hash tag such as {egress} so that Redis Cluster keeps every key in one slot, got "${text}"`,
  ).prefault(d.prefix),
  dataDir: z.string().prefault(d.dataDir),
  host: z.string().prefault(d.host),
  /** False with `--no-auth` (commander's negated option): no token at all, loopback only. */
  auth: optionalSwitch,
  apiTokenFile: optionalText,
  /** `--allow-open-token-file`: use a token file other users can read, with a warning. */
  allowOpenTokenFile: optionalSwitch,
  metricsPort: integer(0, 65535).optional(),
  config: optionalText,
  checkConfig: optionalSwitch,
  store: z.string().prefault(d.store),
  storeKubeconfig: optionalText,
  storeContext: optionalText,
  storeServer: optionalText,
  storeTokenFile: optionalText,
  storeCaFile: optionalText,
  storeSkipTlsVerify: optionalSwitch,
  storeNamespace: optionalText,
  redisUrl,
  redisClusterNodes: clusterNodes,
  redisPasswordFile: optionalText,
  redisCaFile: optionalText,
  redisTls: optionalSwitch,
  redisLostAfter: nonNegativeDuration.prefault(d.redisLostAfter),
  maxBodySize: flagValue(
    (text) => within(parseByteSize(text), 1024, 1024 ** 3),
    (text) => `expected a size from 1KiB to 1GiB such as 1MiB, 512KiB or 65536 (bytes), got "${text}"`,
  ).prefault(d.maxBodySize),
  maxConnections: integer(16, 1_000_000).prefault(d.maxConnections),
  maxConnectionsPerPeer: integer(1, 1_000_000).prefault(d.maxConnectionsPerPeer),
  /** Repeatable `--allowed-host`. */
  allowedHost: allowedHosts.prefault([]),
  echoUrl: httpUrl.optional(),
  resyncInterval: nonNegativeDuration.prefault(d.resyncInterval),
  // The probe pair keeps its text too: their rule (flag-rules.ts) quotes them as typed.
  probeInterval: flagValue(
    (text) => {
      const ms = within(parseDuration(text), 0, Infinity);
      return ms !== undefined && (ms === 0 || ms >= 1000) ? { ms, text } : undefined;
    },
    (text) =>
      within(parseDuration(text), 0, Infinity) === undefined
        ? `expected a duration such as 5m (0 for off), got "${text}"`
        : `expected 0 (probe only on the resync) or at least 1s, got "${text}"`,
  ).prefault(d.probeInterval),
  probeTimeout: flagValue(
    (text) => {
      const ms = within(parseDuration(text), 1, Infinity);
      return ms === undefined ? undefined : { ms, text };
    },
    (text) => `expected a positive duration such as 30s, got "${text}"`,
  ).prefault(d.probeTimeout),
  probeFailures: integer(1, 100).prefault(d.probeFailures),
  probeSuccesses: integer(1, 100).prefault(d.probeSuccesses),
  replaceAfter: positiveDuration.prefault(d.replaceAfter),
  gcInterval: nonNegativeDuration.prefault(d.gcInterval),
  gcGrace: nonNegativeDuration.prefault(d.gcGrace),
  gcDeletesPerSecond: rate(
    0,
    MAX_GC_DELETES_PER_SECOND,
    true,
    (text) => `expected a number of deletions per second above 0 and at most ${MAX_GC_DELETES_PER_SECOND} (such as 5 or 0.5), got "${text}"`,
  ).prefault(d.gcDeletesPerSecond),
  queues,
  concurrency: integer(1, 1000).prefault(d.concurrency),
  lockDuration: positiveDuration.prefault(d.lockDuration),
  stalledInterval: positiveDuration.prefault(d.stalledInterval),
  shutdownGrace: positiveDuration.prefault(d.shutdownGrace),
  lease: positiveDuration.prefault(d.lease),
  eventsMaxAge: flagValue(
    (text) => within(parseDuration(text), 60_000, 90 * DAY_MS),
    (text) =>
      within(parseDuration(text), 1, Infinity) === undefined
        ? `expected a positive duration such as 30s, got "${text}"`
        : `expected a duration from 1m to 2160h (90 days) such as 24h, got "${text}"`,
  ).prefault(d.eventsMaxAge),
  eventsMaxCount: integer(100, 1_000_000).prefault(d.eventsMaxCount),
  feedbackRate: rate(0.01, 10_000, false, (text) => `expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got "${text}"`).prefault(
    d.feedbackRate,
  ),
  pickSessionTtl: boundedDuration(10_000, 7 * DAY_MS, '10s to 168h such as 30m').prefault(d.pickSessionTtl),
  pickCache: boundedDuration(0, 10_000, '0 to 10s such as 1s').prefault(d.pickCache),
  feedbackBlockCooldown: boundedDuration(1000, 7 * DAY_MS, '1s to 168h such as 30m').prefault(d.feedbackBlockCooldown),
  feedbackReplaceDomains: integer(1, 1000).prefault(d.feedbackReplaceDomains),
  feedbackReplaceWindow: boundedDuration(1000, 7 * DAY_MS, '1s to 168h such as 10m').prefault(d.feedbackReplaceWindow),
  feedbackBurst: integer(1, 100_000).prefault(d.feedbackBurst),
});

/** Options shared by the long-running commands, as commander hands them over (strings); absent ones take their default. */
export type ServerFlags = z.input<typeof CHECK_FLAGS> &
  z.input<typeof SERVER_FLAGS> & {
    /** The process environment's OTEL_* variables (tracing); not a flag. */
    otelEnv?: OtelEnv;
    /** True when `--log-level` or EGRESS_LOG_LEVEL was given (a terminal's pretty logs are otherwise quiet); not a flag. */
    logLevelGiven?: boolean;
  };

/** The flags parsed one by one: numbers in their units, durations in milliseconds, the raw text where a rule or a file reads it. */
export type ParsedFlags = z.output<typeof SERVER_FLAGS> & { checks: CheckSchedule; otelEnv: OtelEnv };

/** The name a refusal gives a key: its flag, but `REDIS_URL` (most often set in the environment). */
function flagName(key: PropertyKey | undefined): string {
  if (key === 'redisUrl') return 'REDIS_URL';
  return `--${String(key).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

function parseOrRefuse<T extends z.ZodType>(schema: T, flags: unknown): z.output<T> {
  const result = schema.safeParse(flags, { error: projectErrorMap, reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw new ConfigError(flagName(issue?.path[0]), issue?.message ?? 'invalid');
}

/** Every flag checked alone (the provider-check pair first, as the seed requires): the first mistake is a ConfigError naming its flag. */
export function parseServerFlags(flags: ServerFlags): ParsedFlags {
  const pair = parseOrRefuse(CHECK_FLAGS, flags);
  const checks = resolveCheckSchedule(pair.providerCheckInterval, pair.providerCheckTimeout);
  return { ...parseOrRefuse(SERVER_FLAGS, flags), checks, otelEnv: flags.otelEnv ?? {} };
}
