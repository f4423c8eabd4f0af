import { UsageError } from '../../errors.ts';
import { parseUsageTime, USAGE_TIME_FORMS } from '../../usage/usage-dates.ts';
import type { UsageReport, UsageRow, UsageTotals } from '../../usage/usage-store.ts';
import type { ApiClient } from '../api-client.ts';
import { renderStructured, renderTable, type CliIO } from '../output.ts';
import { parseOutput } from './client-commands.ts';

export interface UsageOptions {
  from?: string;
  to?: string;
  groupBy?: string;
  output?: string;
}

const GROUPS = ['pool', 'provider', 'domain', 'location', 'machineType'];

/** The query string of `egress usage`, every flag checked first: a bad one is a usage error that names it. */
export function usageQuery(opts: UsageOptions): URLSearchParams {
  const q = new URLSearchParams();
  for (const [flag, value, end] of [
    ['--from', opts.from, false],
    ['--to', opts.to, true],
  ] as const) {
    if (value === undefined) continue;
    if (parseUsageTime(value, end) === undefined) throw new UsageError(`${flag}: expected ${USAGE_TIME_FORMS}, got "${value.slice(0, 40)}"`);
    q.set(flag.slice(2), value);
  }
  const groupBy = opts.groupBy ?? 'pool';
  if (!GROUPS.includes(groupBy)) throw new UsageError(`--group-by: expected one of ${GROUPS.join(', ')}, got "${groupBy.slice(0, 40)}"`);
  q.set('groupBy', groupBy);
  return q;
}

/** Bytes as people read them: `0 B`, `12.3 MB`, `1.50 GB` (decimal units, as the prices). */
export function humanBytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

function cells(day: string, key: string, r: UsageTotals | UsageRow, currency: string | null): string[] {
  const cost = currency === null ? '-' : `${r.cost.total.toFixed(2)} ${currency}`;
  return [
    day,
    key,
    humanBytes(r.bytesUp),
    humanBytes(r.bytesDown),
    String(r.requests),
    String(r.tunnels),
    (r.instanceSeconds / 3600).toFixed(1),
    String(r.instances),
    cost,
  ];
}

export function renderUsage(report: UsageReport): string {
  const headers = ['DAY', report.groupBy.toUpperCase(), 'UP', 'DOWN', 'REQUESTS', 'TUNNELS', 'INSTANCE-HOURS', 'INSTANCES', 'COST'];
  const rows = report.rows.map((r) => cells(r.day, r.key, r, report.currency));
  rows.push(cells('TOTAL', '', report.totals, report.currency));
  return `${report.from} to ${report.to}\n${renderTable(headers, rows)}`;
}

/** `egress usage [--from] [--to] [--group-by pool|provider|domain|location|machineType] [-o table|json|yaml]`: the API's GET /v1/usage. */
export async function showUsage(client: ApiClient, io: CliIO, opts: UsageOptions, signal: AbortSignal): Promise<number> {
  const format = parseOutput(opts.output, ['table', 'json', 'yaml']);
  const q = usageQuery(opts);
  const report = await client.request<UsageReport>('GET', `/v1/usage?${q.toString()}`, signal);
  io.out(format === 'json' || format === 'yaml' ? renderStructured(report, format) : renderUsage(report));
  return 0;
}
