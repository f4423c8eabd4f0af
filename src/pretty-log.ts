/**
 * Log lines for a person at a terminal: pino writes JSON lines, and this stream turns each into
 * one line of text — `12:04:31 WARN  worker: message key=value …` — before it reaches its
 * destination. It sits after the logger's redaction (createLogger applies the secret registry as
 * each JSON line is written), so whatever it prints was redacted as the JSON was.
 */
import type { DestinationStream } from 'pino';

/** How `--log-format` values are spelled; `auto` is pretty on a terminal, JSON otherwise. */
export const LOG_FORMATS = ['auto', 'pretty', 'json'] as const;
export type LogFormatFlag = (typeof LOG_FORMATS)[number];
export type LogFormat = 'pretty' | 'json';

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** ANSI colours of the level names on a colour terminal. */
const LEVEL_COLOURS: Record<number, string> = { 10: '90', 20: '90', 30: '36', 40: '33', 50: '31', 60: '35' };
/** Fields every line has, or that the prefix already shows. */
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'role', 'component', 'provider']);

/** The format of `--log-format`: auto is pretty when standard error is a terminal. */
export function resolveLogFormat(flag: LogFormatFlag, stderrIsTty: boolean): LogFormat {
  if (flag === 'auto') return stderrIsTty ? 'pretty' : 'json';
  return flag;
}

function clock(time: unknown): string {
  const date = typeof time === 'number' ? new Date(time) : new Date();
  return date.toTimeString().slice(0, 8);
}

/** A value as `key=value` shows it: bare when it is a word, JSON otherwise. */
function shown(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (value instanceof Object && typeof (value as { message?: unknown }).message === 'string') return JSON.stringify((value as { message: string }).message);
  return JSON.stringify(value) ?? String(value);
}

/** One JSON log line as one line of text (a line that is not JSON passes as it is). */
export function prettyLine(json: string, colour = false): string {
  let entry: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(json);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return json.endsWith('\n') ? json : `${json}\n`;
    entry = parsed as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = typeof entry.level === 'number' ? entry.level : 30;
  const name = (LEVEL_NAMES[level] ?? String(level)).padEnd(5);
  const label = colour ? `\u001b[${LEVEL_COLOURS[level] ?? '0'}m${name}\u001b[0m` : name;
  const source = [entry.role, entry.component, entry.provider].filter((v): v is string => typeof v === 'string');
  const prefix = source.length > 0 ? `${source.join('/')}: ` : '';
  const fields = Object.entries(entry)
    .filter(([key, value]) => !HIDDEN.has(key) && value !== undefined)
    .map(([key, value]) => `${key}=${shown(value)}`);
  const message = typeof entry.msg === 'string' ? entry.msg : '';
  return `${clock(entry.time)} ${label} ${prefix}${message}${fields.length > 0 ? `  ${fields.join(' ')}` : ''}\n`;
}

/** A destination that writes each JSON line it receives to `out` as prettyLine makes it. */
export function prettyLogStream(out: DestinationStream, options: { colour?: boolean } = {}): DestinationStream {
  const colour = options.colour === true;
  return {
    write(text: string): void {
      // pino writes one line per call; split anyway, so nothing is lost if it ever batches.
      for (const line of text.split('\n')) if (line.trim() !== '') out.write(prettyLine(line, colour));
    },
  };
}
