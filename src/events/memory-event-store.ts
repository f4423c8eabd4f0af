import {
  matchesQuery,
  parseEventId,
  storedEvent,
  type EgressEvent,
  type EventQuery,
  type EventRetention,
  type EventSink,
  type EventStore,
} from './event-sink.ts';

/** Events in memory, for pure tests: the Redis stream's semantics (ids, retention, reads) without Redis. */
export class MemoryEventStore implements EventStore {
  readonly #events: EgressEvent[] = [];
  readonly #retention: EventRetention;
  readonly #now: () => number;
  #last: [number, number] = [0, 0];

  constructor(retention: EventRetention, now: () => number = Date.now) {
    this.#retention = retention;
    this.#now = now;
  }

  sink(source: string): EventSink {
    return {
      record: (event) => {
        const ms = Math.max(this.#now(), this.#last[0]);
        const seq = ms === this.#last[0] ? this.#last[1] + 1 : 0;
        this.#last = [ms, seq];
        this.#events.push({ ...storedEvent(event), id: `${ms}-${seq}`, time: new Date(ms).toISOString(), source });
        const cutoff = ms - this.#retention.maxAgeMs;
        while (this.#events.length > this.#retention.maxCount) this.#events.shift();
        while ((this.#events[0] && (parseEventId(this.#events[0].id)?.[0] ?? 0) < cutoff) === true) this.#events.shift();
      },
    };
  }

  list(query: EventQuery, signal?: AbortSignal): Promise<EgressEvent[]> {
    signal?.throwIfAborted();
    const cutoff = this.#now() - this.#retention.maxAgeMs;
    const since = query.since;
    const after = (e: EgressEvent): boolean => {
      const [ms, seq] = parseEventId(e.id) ?? [0, 0];
      if (ms < cutoff) return false;
      if (since === undefined) return true;
      if ('timeMs' in since) return ms >= since.timeMs;
      const [sms, sseq] = parseEventId(since.id) ?? [0, 0];
      return ms > sms || (ms === sms && seq > sseq);
    };
    const matching = this.#events.filter((e) => after(e) && matchesQuery(e, query));
    return Promise.resolve(since === undefined ? matching.slice(-query.limit) : matching.slice(0, query.limit));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
