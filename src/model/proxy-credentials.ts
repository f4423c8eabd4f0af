import { randomBytes } from 'node:crypto';

/** Basic Proxy-Authorization for one proxy: what the stores keep, reconcile hands a provider and discovery serves. */
export interface ProxyCredentials {
  username: string;
  password: string;
}

/** Fresh Basic Proxy-Authorization credentials for one proxy: URL-safe, 192 bits of secret. */
export function generateCredentials(proxyName: string): ProxyCredentials {
  return { username: `egress-${proxyName}`.slice(0, 64), password: randomBytes(24).toString('base64url') };
}

/** `http://user:pass@host:port` for a client; the URL without credentials stays in the status. */
export function urlWithCredentials(url: string, credentials: ProxyCredentials): string {
  const u = new URL(url);
  u.username = encodeURIComponent(credentials.username);
  u.password = encodeURIComponent(credentials.password);
  return u.toString().replace(/\/$/, '');
}
