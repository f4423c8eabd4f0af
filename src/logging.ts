import { pino, type Logger as PinoLogger, type DestinationStream } from 'pino';
import { prettyLogStream, type LogFormat } from './pretty-log.ts';
import type { Redactor } from './secrets/secret-registry.ts';

export type Logger = PinoLogger;

export interface LoggingOptions {
  level: string;
  /** Where log lines go; standard error by default so that command output stays clean. */
  destination?: DestinationStream;
  /**
   * The process's secret registry (src/secrets): every log line, as written, passes its redaction, so
   * a secret quoted in an error's message or stack never reaches the log whatever key it is under.
   * The key paths below stay: they hide values whose secret the registry may not know.
   */
  secrets?: Redactor;
  /**
   * `pretty`: one line of text per entry, for a terminal (src/pretty-log.ts), written after the
   * redaction above; `json` (the default): pino's JSON lines.
   */
  format?: LogFormat;
  /** With `pretty`: colour the level names (a colour terminal). */
  colour?: boolean;
}

/** Keys whose values must never reach a log line. */
const REDACT = [
  'password',
  'token',
  'authorization',
  '*.password',
  '*.token',
  '*.authorization',
  '*.privateKey',
  '*.credentials',
  'headers.authorization',
  'req.headers.authorization',
];

/** Builds the process logger. Only entry points call this; everything below receives a Logger. */
export function createLogger(options: LoggingOptions): Logger {
  const secrets = options.secrets;
  const destination = options.destination ?? pino.destination(2);
  return pino(
    {
      level: options.level,
      redact: { paths: REDACT, censor: '[redacted]' },
      base: { pid: process.pid },
      ...(secrets ? { hooks: { streamWrite: (line: string) => secrets.redact(line) } } : {}),
    },
    options.format === 'pretty' ? prettyLogStream(destination, { colour: options.colour === true }) : destination,
  );
}

/** A logger that discards everything, for tests and library callers that pass none. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
