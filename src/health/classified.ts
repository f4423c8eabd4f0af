import type { Reason } from './reasons.ts';

/** A failure mapped to a reason, with the message a check reports. */
export interface Classified {
  reason: Reason;
  message: string;
}

/** The longest message a check reports; the publisher truncates to 1024 too. */
export const MAX_MESSAGE = 1024;

export function truncate(message: string, max = MAX_MESSAGE): string {
  return message.length <= max ? message : `${message.slice(0, max - 1)}…`;
}
