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

export function withProxyUrl(proxy: Proxy, credentials: ProxyCredentials | undefined): ProxyView {
  return proxy.status.url && credentials ? { ...proxy, proxyUrl: urlWithCredentials(proxy.status.url, credentials) } : { ...proxy };
}

/** A strong ETag of a response body, so crawlers can poll with If-None-Match and get 304s. */
export function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}
