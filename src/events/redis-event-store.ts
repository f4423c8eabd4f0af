import type { Logger } from '../logging.ts';
import type { RedisClient } from '../redis/connections.ts';
import { NO_REDACTION, type Redactor } from '../secrets/secret-registry.ts';
import {
  EVENT_KINDS,
  EVENT_REASONS,
  EVENT_TYPES,
  matchesQuery,
  storedEvent,
  type EgressEvent,
  type EventQuery,
  type EventRetention,
  type EventSink,
  type EventStore,
} from './event-sink.ts';

/**
 * Appends one event and applies both retentions in one step. KEYS[1] the stream; ARGV[1] the
 * count kept, ARGV[2] the age kept (ms), ARGV[3] the event (JSON). Trimming is exact (a few
 * events a second at most: exactness costs nothing here and makes the flags mean what they say);
 * the age is measured on the server's clock, from the id it gave the new entry.
 */
const APPEND = `
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], '*', 'e', ARGV[3])
local ms = tonumber(string.match(id, '^(%d+)-'))
redis.call('XTRIM', KEYS[1], 'MINID', tostring(ms - tonumber(ARGV[2])))
return id`;

/** Stream entries read per round trip. */
const PAGE = 500;
/** Writes waiting for Redis beyond which new events are dropped (and counted) rather than queued. */
const MAX_IN_FLIGHT = 1000;
/** How long `close` waits for writes in flight. */
const CLOSE_GRACE_MS = 2000;

type StreamEntry = [id: string, fields: string[]];

function isStored(value: unknown): value is Omit<EgressEvent, 'id' | 'time'> {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  const object = v.object as Record<string, unknown> | undefined;
  return (
    (EVENT_TYPES as readonly unknown[]).includes(v.type) &&
    (EVENT_REASONS as readonly unknown[]).includes(v.reason) &&
    typeof object === 'object' &&
    object !== null &&
    (EVENT_KINDS as readonly unknown[]).includes(object.kind) &&
    typeof object.name === 'string' &&
    typeof v.message === 'string' &&
    typeof v.source === 'string'
  );
}

/** A stream entry as an event; undefined for an entry this version cannot read. */
function toEvent([id, fields]: StreamEntry): EgressEvent | undefined {
  const i = fields.indexOf('e');
  const text = i >= 0 ? fields[i + 1] : undefined;
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isStored(value)) return undefined;
  return { id, time: new Date(Number(id.split('-')[0])).toISOString(), ...value };
}

/** The id right after `id` (XRANGE's exclusive start without relying on its `(` syntax in scripts). */
function idAfter(id: string): string {
  return `(${id}`;
}

/**
 * Events of a fleet in one Redis stream, `<prefix>:events` (the hash-tagged prefix keeps it in the
 * slot of every other key: Redis Cluster safe). Appends trim by count and age (`APPEND`); reads
 * page through XRANGE (forward from a cursor or time) or XREVRANGE (the newest), filtering as
 * they go, so a read costs at most the retained events.
 */
export class RedisEventStore implements EventStore {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #retention: EventRetention;
  readonly #logger: Logger;
  readonly #redactor: Redactor;
  readonly #inFlight = new Set<Promise<void>>();
  #dropped = 0;

  /** `redactor`: the process's secret registry (src/secrets), through which every event's text passes. */
  constructor(redis: RedisClient, prefix: string, retention: EventRetention, logger: Logger, redactor: Redactor = NO_REDACTION) {
    this.#redis = redis;
    this.#redactor = redactor;
    this.#key = `${prefix}:events`;
    this.#retention = retention;
    this.#logger = logger;
  }

  get key(): string {
    return this.#key;
  }

  sink(source: string): EventSink {
    return { record: (event) => this.#append(JSON.stringify({ ...storedEvent(event, this.#redactor), source }), event.reason) };
  }

  #append(text: string, reason: string): void {
    if (this.#inFlight.size >= MAX_IN_FLIGHT) {
      this.#dropped++;
      if (this.#dropped === 1 || this.#dropped % 1000 === 0) this.#logger.warn({ dropped: this.#dropped, reason }, 'events dropped: Redis is not keeping up');
      return;
    }
    const write = this.#redis.eval(APPEND, 1, this.#key, String(this.#retention.maxCount), String(this.#retention.maxAgeMs), text).then(
      () => undefined,
      (err: unknown) => this.#logger.warn({ err: (err as Error).message, reason }, 'could not record an event'),
    );
    this.#inFlight.add(write);
    void write.finally(() => this.#inFlight.delete(write));
  }

  async list(query: EventQuery, signal?: AbortSignal): Promise<EgressEvent[]> {
    const cutoff = Date.now() - this.#retention.maxAgeMs;
    const found: EgressEvent[] = [];
    const since = query.since;
    if (since !== undefined) {
      let start = 'id' in since ? idAfter(since.id) : String(Math.max(since.timeMs, cutoff, 0));
      for (;;) {
        signal?.throwIfAborted();
        const page = (await this.#redis.xrange(this.#key, start, '+', 'COUNT', PAGE)) as StreamEntry[];
        for (const entry of page) {
          const event = toEvent(entry);
          if (event && Date.parse(event.time) >= cutoff && matchesQuery(event, query)) found.push(event);
          if (found.length >= query.limit) return found;
        }
        const last = page.at(-1);
        if (!last || page.length < PAGE) return found;
        start = idAfter(last[0]);
      }
    }
    let end = '+';
    for (;;) {
      signal?.throwIfAborted();
      const page = (await this.#redis.xrevrange(this.#key, end, '-', 'COUNT', PAGE)) as StreamEntry[];
      for (const entry of page) {
        const event = toEvent(entry);
        if (!event) continue;
        if (Date.parse(event.time) < cutoff) return found.reverse();
        if (matchesQuery(event, query)) found.push(event);
        if (found.length >= query.limit) return found.reverse();
      }
      const last = page.at(-1);
      if (!last || page.length < PAGE) return found.reverse();
      end = idAfter(last[0]);
    }
  }

  /**
   * Waits for the writes in flight, at most `graceMs`: on a connection that retries for ever (the
   * roles' worker connection) a write waits as long as Redis is away, and shutdown must not. What
   * is still unwritten then is logged as lost. The connection is the caller's.
   */
  async close(graceMs = CLOSE_GRACE_MS): Promise<void> {
    const pending = [...this.#inFlight];
    if (pending.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), graceMs);
    });
    const outcome = await Promise.race([Promise.allSettled(pending).then(() => 'done' as const), late]);
    clearTimeout(timer);
    if (outcome === 'late') this.#logger.warn({ unwritten: this.#inFlight.size }, 'events not written before shutdown: Redis did not answer');
  }
}
