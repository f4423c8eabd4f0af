/** The user and password a client sent in `Proxy-Authorization: Basic …` (RFC 7617). */
export interface BasicCredentials {
  username: string;
  password: string;
}

/**
 * Reads a `Proxy-Authorization` header: `undefined` when there is none, `'malformed'` when it is
 * there but not Basic credentials (another scheme, or no user-pass at all). A user-pass without a
 * colon is a user with an empty password, as common proxies read it.
 */
export function basicCredentials(header: string | undefined): BasicCredentials | 'malformed' | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  if (value === '') return undefined;
  const space = value.indexOf(' ');
  if (space <= 0 || value.slice(0, space).toLowerCase() !== 'basic') return 'malformed';
  const userPass = Buffer.from(value.slice(space + 1).trim(), 'base64').toString('utf8');
  const colon = userPass.indexOf(':');
  if (colon === -1) return { username: userPass, password: '' };
  return { username: userPass.slice(0, colon), password: userPass.slice(colon + 1) };
}
