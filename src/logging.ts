import { pino, type Logger as PinoLogger, type DestinationStream } from 'pino';

export type Logger = PinoLogger;

export interface LoggingOptions {
  level: string;
  /** Where log lines go; standard error by default so that command output stays clean. */
  destination?: DestinationStream;
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
  return pino(
    { level: options.level, redact: { paths: REDACT, censor: '[redacted]' }, base: { pid: process.pid } },
    options.destination ?? pino.destination(2),
  );
}

/** A logger that discards everything, for tests and library callers that pass none. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
