import { UsageError } from '../../errors.ts';
import { EVENT_REASONS, EVENT_TYPES, type EgressEvent } from '../../events/event-sink.ts';
import { parseSince, SINCE_FORMS } from '../../events/since.ts';
import type { ProviderHealth } from '../../health/provider-health.ts';
import type { ProxyView } from '../../proxies/discovery.ts';
import type { ApiClient } from '../api-client.ts';
import { age, renderStructured, renderTable, targetCells, type CliIO } from '../output.ts';
import { parseOutput } from './client-commands.ts';

export interface EventsOptions {
  proxy?: string;
  provider?: string;
  type?: string;
  reason?: string;
  since?: string;
  limit?: string;
  watch?: boolean;
  output?: string;
}

/** Events a page of `egress events` asks for (the API's largest page). */
const PAGE = 1000;
/** How often `--watch` asks for what is new. */
export const WATCH_POLL_MS = 1000;
/** Events `describe` shows: the newest, as kubectl does. */
const DESCRIBE_EVENTS = 20;

function objectOf(e: EgressEvent): string {
  return `${e.object.kind.toLowerCase()}/${e.object.name}`;
}

function eventRow(e: EgressEvent, now: Date): string[] {
  return [age(e.time, now), e.type, e.reason, objectOf(e), e.message];
}

const EVENT_HEADERS = ['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', 'MESSAGE'];
/** Column widths of a watch: its rows arrive one by one, so they cannot be measured together. */
const WATCH_WIDTHS = [9, 7, 18, 36];

function fixedRow(cells: readonly string[]): string {
  return (
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(WATCH_WIDTHS[i] ?? 0)))
      .join('   ')
      .trimEnd() + '\n'
  );
}

/** The query string of a read, every flag checked first: a bad one is a usage error that names it. */
export function eventQuery(opts: EventsOptions, now: number): URLSearchParams {
  const q = new URLSearchParams();
  if (opts.proxy !== undefined) q.set('proxy', opts.proxy);
  if (opts.provider !== undefined) q.set('provider', opts.provider);
  if (opts.type !== undefined) {
    if (!(EVENT_TYPES as readonly string[]).includes(opts.type))
      throw new UsageError(`--type: expected ${EVENT_TYPES.join(' or ')}, got "${opts.type.slice(0, 40)}"`);
    q.set('type', opts.type);
  }
  if (opts.reason !== undefined) {
    if (!(EVENT_REASONS as readonly string[]).includes(opts.reason))
      throw new UsageError(`--reason: unknown reason "${opts.reason.slice(0, 40)}" (known: ${EVENT_REASONS.join(', ')})`);
    q.set('reason', opts.reason);
  }
  if (opts.since !== undefined) {
    if (parseSince(opts.since, now) === undefined) throw new UsageError(`--since: expected ${SINCE_FORMS}, got "${opts.since.slice(0, 40)}"`);
    q.set('since', opts.since);
  }
  const limit = opts.limit === undefined ? 500 : Number(opts.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE) throw new UsageError(`--limit: expected an integer from 1 to ${PAGE}, got "${opts.limit ?? ''}"`);
  q.set('limit', String(limit));
  return q;
}

function read(client: ApiClient, q: URLSearchParams, signal: AbortSignal): Promise<{ items: EgressEvent[] }> {
  return client.request<{ items: EgressEvent[] }>('GET', `/v1/events?${q.toString()}`, signal);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * `egress events`: the fleet's events, oldest first, as `kubectl get events` lists them. With
 * `--watch` it then prints each new event as it is recorded (asking the API for what came after
 * the last one it printed, every second; each answer bounded by the API's page) until `signal`
 * ends it. `-o json` prints `{items}`, or with `--watch` one event a line.
 */
export async function listEvents(client: ApiClient, io: CliIO, opts: EventsOptions, signal: AbortSignal, pollMs: number = WATCH_POLL_MS): Promise<number> {
  const format = parseOutput(opts.output, ['table', 'json', 'yaml']);
  if (opts.watch && format === 'yaml') throw new UsageError('-o/--output: --watch prints json or a table, not yaml');
  const q = eventQuery(opts, Date.now());
  const { items } = await read(client, q, signal);
  if (!opts.watch) {
    if (format === 'json' || format === 'yaml') io.out(renderStructured({ items }, format));
    else if (items.length === 0) io.err('No events found\n');
    else
      io.out(
        renderTable(
          EVENT_HEADERS,
          items.map((e) => eventRow(e, new Date())),
        ),
      );
    return 0;
  }
  const print = (events: readonly EgressEvent[]): void => {
    const now = new Date();
    for (const e of events) io.out(format === 'json' ? `${JSON.stringify(e)}\n` : fixedRow(eventRow(e, now)));
  };
  if (format === 'table') io.out(fixedRow(EVENT_HEADERS));
  print(items);
  // After the last event printed; before any, after what --since said (or the stream's start).
  let cursor = items.at(-1)?.id ?? opts.since ?? '0-0';
  q.set('limit', String(PAGE));
  while (!signal.aborted) {
    q.set('since', cursor);
    let page: EgressEvent[];
    try {
      page = (await read(client, q, signal)).items;
    } catch (err) {
      if (signal.aborted) break;
      throw err;
    }
    print(page);
    cursor = page.at(-1)?.id ?? cursor;
    // A full page means more are waiting: ask again at once.
    if (page.length < PAGE) await sleep(pollMs, signal);
  }
  return 0;
}

function field(label: string, value: string, indent = ''): string {
  // At least one space between a label and its value, whatever the label's length.
  return `${indent}${`${label}: `.padEnd(22 - indent.length)}${value}\n`;
}

function none(value: string | undefined): string {
  return value === undefined || value === '' ? '<none>' : value;
}

/** The events section of a describe, indented, as kubectl prints it. */
function eventsSection(events: readonly EgressEvent[]): string {
  if (events.length === 0) return 'Events:               <none>\n';
  const now = new Date();
  const table = renderTable(
    ['Type', 'Reason', 'Age', 'From', 'Message'],
    [['----', '------', '----', '----', '-------'], ...events.map((e) => [e.type, e.reason, age(e.time, now), e.source, e.message])],
  );
  return `Events:\n${table
    .split('\n')
    .filter(Boolean)
    .map((l) => `  ${l}\n`)
    .join('')}`;
}

function indentTable(table: string): string {
  return table
    .split('\n')
    .filter(Boolean)
    .map((l) => `  ${l}\n`)
    .join('');
}

function describeProxyText(p: ProxyView, events: readonly EgressEvent[]): string {
  const s = p.status;
  const labels = Object.entries(p.labels).map(([k, v]) => `${k}=${v}`);
  let out = '';
  out += field('Name', p.name);
  out += field('Provider', p.spec.provider);
  out += field('Placement', none(p.spec.placement));
  out += field('Labels', labels.length ? (labels[0] ?? '') : '<none>');
  for (const l of labels.slice(1)) out += `${''.padEnd(22)}${l}\n`;
  out += field('Created', `${p.metadata.createdAt} (${age(p.metadata.createdAt)} ago)`);
  out += field('Generation', String(p.metadata.generation));
  if (p.metadata.deletionRequestedAt)
    out += field('Deletion Requested', `${p.metadata.deletionRequestedAt}${p.metadata.orphanInstance ? ' (orphan: the instance is left in place)' : ''}`);
  out += 'Status:\n';
  out += field('Phase', s.phase, '  ');
  // The URL without credentials: discovery's proxyUrl carries them and a describe is for reading over a shoulder.
  out += field('URL', none(s.url), '  ');
  out += field('Egress IP', none(s.egressIp), '  ');
  out += field('Instance', s.instanceName ? `${s.instanceName}${s.instanceId ? ` (${s.instanceId})` : ''}` : '<none>', '  ');
  out += field(
    'Location',
    s.instanceLocation ? `${s.instanceLocation.provider}${s.instanceLocation.placement ? `/${s.instanceLocation.placement}` : ''}` : '<none>',
    '  ',
  );
  out += field('Observed Generation', String(s.observedGeneration), '  ');
  out += field('Probe Failures', String(s.probeFailures ?? 0), '  ');
  if (s.unreadySince) out += field('Unready Since', s.unreadySince, '  ');
  out += field('Last Error', none(s.lastError), '  ');
  if (s.conditions.length === 0) out += 'Conditions:           <none>\n';
  else
    out += `Conditions:\n${indentTable(
      renderTable(
        ['Type', 'Status', 'Reason', 'Last Transition', 'Message'],
        [['----', '------', '------', '---------------', '-------'], ...s.conditions.map((c) => [c.type, c.status, c.reason, c.lastTransitionTime, c.message])],
      ),
    )}`;
  return out + eventsSection(events);
}

function describeHealthText(ph: ProviderHealth, events: readonly EgressEvent[]): string {
  let out = '';
  out += field('Name', ph.name);
  out += field('Ready', String(ph.status.ready));
  out += field('Last Check', `${ph.status.lastCheckTime} (${age(ph.status.lastCheckTime)} ago)`);
  out += field('Last Transition', `${ph.status.lastTransitionTime} (${age(ph.status.lastTransitionTime)} ago)`);
  out += `Targets:\n${indentTable(
    renderTable(
      ['Name', 'Ready', 'Reason', 'Duration', 'Last Check', 'Since', 'Message'],
      [['----', '-----', '------', '--------', '----------', '-----', '-------'], ...ph.status.targets.map((t) => [t.name, ...targetCells(t, 120)])],
    ),
  )}`;
  return out + eventsSection(events);
}

const DESCRIBE_TYPES = 'proxy (proxies), providerhealth (ph)';

/** `egress describe proxy NAME` / `egress describe ph NAME`: status, conditions and the newest events. */
export async function describe(client: ApiClient, io: CliIO, kind: string, name: string, signal: AbortSignal): Promise<number> {
  const q = new URLSearchParams({ limit: String(DESCRIBE_EVENTS) });
  if (kind === 'proxy' || kind === 'proxies') {
    const proxy = await client.request<ProxyView>('GET', `/v1/proxies/${encodeURIComponent(name)}`, signal);
    q.set('proxy', name);
    io.out(describeProxyText(proxy, (await read(client, q, signal)).items));
    return 0;
  }
  if (kind === 'providerhealth' || kind === 'ph') {
    const ph = await client.request<ProviderHealth>('GET', `/v1/providerhealths/${encodeURIComponent(name)}`, signal);
    q.set('kind', 'ProviderHealth');
    q.set('provider', name);
    io.out(describeHealthText(ph, (await read(client, q, signal)).items));
    return 0;
  }
  throw new UsageError(`describe: unknown resource type "${kind.slice(0, 40)}" (known: ${DESCRIBE_TYPES})`);
}
