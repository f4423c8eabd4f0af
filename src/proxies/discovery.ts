import { createHash } from 'node:crypto';
import { urlWithCredentials } from '../model/proxy-credentials.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { ProxyCredentials } from '../model/proxy-credentials.ts';

export interface DiscoveryFilter {
  ready?: boolean;
  provider?: string;
  /** `k=v` pairs, all of which must match. */
  labels: [string, string][];
}

/** A proxy as the API returns it to an authorised caller: with `proxyUrl` carrying credentials. */
export type ProxyView = Proxy & { proxyUrl?: string };

export function matches(proxy: Proxy, filter: DiscoveryFilter): boolean {
  if (filter.ready !== undefined && (proxy.status.phase === 'Ready') !== filter.ready) return false;
  if (filter.provider !== undefined && proxy.spec.provider !== filter.provider) return false;
  return filter.labels.every(([k, v]) => proxy.labels[k] === v);
}

/** How a crawler speaks to the proxies: HTTP proxying (the default) or SOCKS5, both on the same port with the same credentials. */
export type ProxyScheme = 'http' | 'socks5';

export function withProxyUrl(proxy: Proxy, credentials: ProxyCredentials | undefined, scheme: ProxyScheme = 'http'): ProxyView {
  if (!proxy.status.url || !credentials) return { ...proxy };
  const url = scheme === 'socks5' ? proxy.status.url.replace(/^http:\/\//, 'socks5://') : proxy.status.url;
  return { ...proxy, proxyUrl: urlWithCredentials(url, credentials) };
}

/** A strong ETag of a response body, so crawlers can poll with If-None-Match and get 304s. */
export function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}
