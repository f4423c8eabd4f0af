import { domainToASCII } from 'node:url';
import { EgressError } from '../errors.ts';

/** A pick or feedback parameter a client got wrong: answered 400 naming it. */
export class PickInputError extends EgressError {
  constructor(
    readonly parameter: string,
    message: string,
  ) {
    super('ERR_BAD_REQUEST', `${parameter}: ${message}`);
  }
}

export const SESSION_MAX = 128;
const SESSION = /^[A-Za-z0-9_.~:-]+$/;

/**
 * A session id as a crawler sends it (Crawlee's `session_AbC…`, a UUID, a worker's counter): 1 to
 * 128 characters of letters, digits and `_ . ~ : -`. It becomes part of a Redis key, never a path.
 */
export function parseSession(text: string, parameter = 'session'): string {
  if (text.length === 0) throw new PickInputError(parameter, 'must not be empty');
  if (text.length > SESSION_MAX) throw new PickInputError(parameter, `expected at most ${SESSION_MAX} characters, got ${text.length}`);
  if (!SESSION.test(text)) throw new PickInputError(parameter, 'expected letters, digits and _ . ~ : - only');
  return text;
}

export const DOMAIN_MAX = 253;
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * A site's host name as blocks are kept: lower-case, without a trailing dot, international names
 * in their ASCII (punycode) form; labels of letters, digits and inner dashes, at most 63 each and
 * 253 in all. Blocks are per exact host name (`www.example.com` and `example.com` are two).
 */
export function parseDomain(text: string, parameter = 'domain'): string {
  if (text.length === 0) throw new PickInputError(parameter, 'must not be empty');
  if (text.length > DOMAIN_MAX + 1) throw new PickInputError(parameter, `expected a host name of at most ${DOMAIN_MAX} characters, got ${text.length}`);
  let host = text.toLowerCase().replace(/\.$/, '');
  // eslint-disable-next-line no-control-regex
  if (/[^\x00-\x7f]/.test(host)) host = domainToASCII(host);
  if (host.length === 0 || host.length > DOMAIN_MAX || !host.split('.').every((label) => LABEL.test(label)))
    throw new PickInputError(parameter, `expected a host name such as example.com, got "${text.slice(0, 100)}"`);
  return host;
}

const TIER = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** A tier as picks select it: a label value of 1 to 63 letters, digits and inner `- _ .` (as `datacenter`). */
export function parseTier(text: string, parameter = 'tier'): string {
  if (text.length === 0) throw new PickInputError(parameter, 'must not be empty');
  if (text.length > 63 || !TIER.test(text))
    throw new PickInputError(parameter, `expected a label value such as datacenter (letters, digits, inner - _ .), got "${text.slice(0, 64)}"`);
  return text;
}
