import type { Reason } from './reasons.ts';

export { MAX_MESSAGE, truncateMessage } from './message.ts';

/** A failure mapped to a reason, with the message a check reports. */
export interface Classified {
  reason: Reason;
  message: string;
}
