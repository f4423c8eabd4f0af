/** The longest message a ProviderHealth target carries, in characters (code points). */
export const MAX_MESSAGE = 1024;

/**
 * The one truncation of check messages, used by every provider's check and again by the
 * publisher (a result from an older worker may carry a longer one). Counts code points, so a
 * surrogate pair is never split; a cut message ends with `…` and is exactly `max` long.
 */
export function truncateMessage(message: string, max = MAX_MESSAGE): string {
  if (message.length <= max) return message;
  const chars = Array.from(message);
  return chars.length <= max ? message : `${chars.slice(0, max - 1).join('')}…`;
}
