import ipaddr from 'ipaddr.js';
import { z } from 'zod';

/**
 * A CIDR range (`10.0.0.0/8`, `fd00::/8`) or a single address (taken as /32 or /128). The parsed
 * value is the normalised CIDR text (`::ffff:10.0.0.0/104` stays IPv6; a mapped range should be
 * written as its IPv4 form).
 */
export const cidrSchema = z.string().transform((text, ctx) => {
  const value = text.trim();
  try {
    if (value.includes('/')) {
      const [address, prefix] = ipaddr.parseCIDR(value);
      return `${address.toNormalizedString()}/${prefix}`;
    }
    const address = ipaddr.parse(value);
    return `${address.toNormalizedString()}/${address.kind() === 'ipv4' ? 32 : 128}`;
  } catch {
    ctx.addIssue({ code: 'custom', message: `expected a CIDR range such as 10.0.0.0/8 or fd00::/8, or an IP address, got "${text}"` });
    return z.NEVER;
  }
});

/**
 * `proxies.egressPolicy` of a provider: ranges its proxies may reach beyond the default (allow)
 * and further ranges they must not (deny). The orchestrator's own listeners stay denied whatever
 * `allow` says. See docs/proxies.md#egress-policy.
 */
export const egressPolicySchema = z.strictObject({
  allow: z.array(cidrSchema).max(256).default([]),
  deny: z.array(cidrSchema).max(256).default([]),
});

export type EgressPolicyConfig = z.infer<typeof egressPolicySchema>;

/** One listener of the orchestrator that no proxy may reach (`host` is an address or a name the proxy resolves). */
export interface GuardedEndpoint {
  host: string;
  port: number;
  /** What listens there, for the logs and the docs: `api`, `metrics`, `redis`, or `proxy` (a proxy's own listener, added by the proxy itself). */
  role: 'api' | 'metrics' | 'redis' | 'proxy';
}

/** The readiness probe's echo: the one request to a guarded listener a proxy lets through (a plain-HTTP `GET` of exactly `path`). */
export interface EchoEndpoint {
  host: string;
  port: number;
  path: string;
}

/** What the process knows about its own listeners, handed to every provider (ProviderDeps.egress). */
export interface EgressGuards {
  guarded: readonly GuardedEndpoint[];
  echo: EchoEndpoint | undefined;
}

/**
 * The egress policy as a proxy instance receives it, whatever the provider (a file for local
 * proxies; an environment variable, instance metadata or an SMBIOS string elsewhere): the same
 * JSON document, `version` 1.
 */
export interface ProxyEgressPolicy {
  version: 1;
  allow: string[];
  deny: string[];
  guarded: GuardedEndpoint[];
  echo?: EchoEndpoint;
}

/** Combines a provider's configured policy with the process's guarded listeners. */
export function proxyEgressPolicy(config: EgressPolicyConfig | undefined, guards: EgressGuards | undefined): ProxyEgressPolicy {
  return {
    version: 1,
    allow: [...(config?.allow ?? [])],
    deny: [...(config?.deny ?? [])],
    guarded: (guards?.guarded ?? []).map((g) => ({ ...g })),
    ...(guards?.echo ? { echo: { ...guards.echo } } : {}),
  };
}

/** The guards of a process: its Redis, its API listener and its metrics listener, and the echo URL's listener. */
export function egressGuards(listeners: {
  /** The Redis the roles use: a URL, or its listeners (every seed node of a cluster). */
  redisUrl?: string;
  redis?: readonly { host: string; port: number }[];
  api?: { host: string; port: number };
  metrics?: { host: string; port: number };
  echoUrl?: string;
}): EgressGuards {
  const guarded: GuardedEndpoint[] = [];
  const add = (host: string, port: number, role: GuardedEndpoint['role']): void => {
    const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
    if (!guarded.some((g) => g.host === h && g.port === port)) guarded.push({ host: h, port, role });
  };
  if (listeners.redisUrl !== undefined) {
    const redis = new URL(listeners.redisUrl);
    add(redis.hostname, Number(redis.port || 6379), 'redis');
  }
  for (const node of listeners.redis ?? []) add(node.host, node.port, 'redis');
  if (listeners.api) add(listeners.api.host, listeners.api.port, 'api');
  if (listeners.metrics) add(listeners.metrics.host, listeners.metrics.port, 'metrics');
  let echo: EchoEndpoint | undefined;
  if (listeners.echoUrl) {
    const url = new URL(listeners.echoUrl);
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    add(url.hostname, port, 'api');
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    if (url.protocol === 'http:') echo = { host, port, path: url.pathname };
  }
  return { guarded, echo };
}

/**
 * The guards every worker of one deployment agrees on: the Redis listener(s) and the echo URL's
 * listener with its echo. A process's own API and metrics listeners are left out: a standalone
 * `egress worker` has neither, so a document that named them would differ from worker to worker
 * and remote instances (a kubernetes Pod is replaced when its document changes) would flap. The
 * API a remote proxy can reach is the echo URL's listener, which stays guarded.
 */
export function sharedGuards(guards: EgressGuards): EgressGuards {
  const echo = guards.echo;
  const guarded = guards.guarded.filter((g) => g.role === 'redis' || (echo !== undefined && g.host === echo.host && g.port === echo.port));
  return { guarded, echo };
}

/** The document a remote instance (kubernetes, gcp, kvm) receives: the provider's policy with the shared guards. */
export function remoteProxyEgressPolicy(config: EgressPolicyConfig | undefined, guards: EgressGuards | undefined): ProxyEgressPolicy {
  return proxyEgressPolicy(config, guards && sharedGuards(guards));
}
