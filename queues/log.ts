/** The part of the project's logger (pino) the job boundary writes to. */
export interface JobLog {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}
