import { isIP } from 'node:net';
import { z } from 'zod';
import { shownValue } from './zod-helpers.ts';

/** One RFC 1123 label: letters, digits and inner hyphens, 1 to 63 characters. */
const LABEL = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/**
 * True for a DNS host name by RFC 1123: dot-separated labels (an optional final dot), at most 253
 * characters, and a last label that is not all digits — so `999.1.1.1`, which looks like an IPv4
 * address and is not one, is no host name either (RFC 1123 §2.1).
 */
export function isHostName(text: string): boolean {
  const name = text.endsWith('.') ? text.slice(0, -1) : text;
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  return labels.every((label) => LABEL.test(label)) && !/^\d+$/.test(labels[labels.length - 1] ?? '');
}

/** An address to dial: an IPv4 or IPv6 address (without brackets or port), or a DNS host name. */
export const hostAddress = z.string().refine((text) => isIP(text) !== 0 || isHostName(text), {
  error: (issue) => `expected an IPv4 or IPv6 address or a DNS host name, got ${shownValue(issue.input)}`,
});
