import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';

export type OutputFormat = 'table' | 'json' | 'yaml' | 'wide';

/** Where command output goes; injected so tests read it without a child process. */
export interface CliIO {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** The one line the CLI ends a failed command with: `error: <message>`, and ` (<code>)` for an error that has one. */
export function errorLine(err: unknown, withCode = true): string {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | undefined)?.code;
  return `error: ${message}${withCode && typeof code === 'string' ? ` (${code})` : ''}\n`;
}

/** Renders rows as a `kubectl get`-style table: upper-case headers, columns padded by three spaces. */
export function renderTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('   ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

/** YAML's printer, loaded the first time `-o yaml` asks for it (a table or JSON never pays for it). */
const requireModule = createRequire(import.meta.url);
function yamlStringify(value: unknown): string {
  return (requireModule('yaml') as typeof Yaml).stringify(value);
}

export function renderStructured(value: unknown, format: 'json' | 'yaml'): string {
  return format === 'json' ? JSON.stringify(value, null, 2) + '\n' : yamlStringify(value);
}

/** `5s`, `3m`, `2h`, `4d` since an ISO time, as kubectl's AGE column. */
export function age(iso: string, now: Date = new Date()): string {
  const s = Math.max(0, Math.floor((now.getTime() - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

/** What a table shows of one check target after its name: ready, reason, duration, last check, since, message (cut to `width`). */
export function targetCells(
  t: { ready: boolean; reason: string; durationSeconds: number; lastCheckTime: string; lastTransitionTime: string; message: string },
  width: number,
): string[] {
  const message = t.message.length > width ? `${t.message.slice(0, width - 3)}...` : t.message;
  return [String(t.ready), t.reason, `${t.durationSeconds.toFixed(3)}s`, age(t.lastCheckTime), age(t.lastTransitionTime), message];
}
