import { join } from 'node:path';
import { z } from 'zod';
import { egressPolicySchema } from '../../egress/policy-config.ts';
import { labelKey, labelValue } from '../../model/proxy-resource.ts';
import { durationMs, resourceName } from '../../schema/zod-helpers.ts';
import { providerGcSchema } from '../gc-settings.ts';

/** The schemes an upstream proxy may speak. */
export const UPSTREAM_SCHEMES = ['http:', 'https:', 'socks5:'] as const;

/**
 * A sticky-session username: `{user}` is the endpoint's user, `{session}` the Proxy's session (its
 * name), so each Proxy on the endpoint — each pool member, each pick session's member — keeps one
 * vendor session (one exit) for as long as it lives.
 */
const usernameTemplate = z
  .string()
  .min(1)
  .max(200)
  .refine((t) => t.includes('{session}'), 'a username template must contain {session}');

/** An endpoint's name: short, so that `<provider>-<endpoint>` is a valid proxy name. */
const endpointName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'expected a lower-case name of letters, digits and dashes')
  .max(30);

const upstreamUrl = z.string().superRefine((text, ctx) => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'expected a URL such as http://user@host:port or socks5://user@host:port' });
    return;
  }
  if (!(UPSTREAM_SCHEMES as readonly string[]).includes(url.protocol)) {
    ctx.addIssue({ code: 'custom', message: `expected an http://, https:// or socks5:// URL, got ${url.protocol}//` });
  }
  if (url.hostname === '' || url.port === '') ctx.addIssue({ code: 'custom', message: 'the URL needs a host and a port' });
  // Never inline: configuration is logged and shown; the password comes from `passwordFile`.
  if (url.password !== '') ctx.addIssue({ code: 'custom', message: 'put the password in passwordFile, not in the URL' });
});

export const upstreamEndpointSchema = z.strictObject({
  /** The endpoint's name; its Proxy is `<provider>-<name>`. */
  name: endpointName,
  /** `http://user@host:port`, `https://user@host:port` or `socks5://user@host:port` (no password). */
  url: upstreamUrl,
  /** A file holding the vendor's password (read at start and whenever it changes). Default: the provider's `passwordFile`. */
  passwordFile: z.string().min(1).optional(),
  /** Labels of the endpoint's Proxy (country, vendor, tier…): pools select by them. */
  labels: z.record(labelKey, labelValue).default({}),
  /** A sticky-session username such as `{user}-session-{session}` (default: the provider's, else the user as it is). */
  usernameTemplate: usernameTemplate.optional(),
  /** `https://` only: PEM certificate authorities the vendor's certificate is checked against, besides the system's (default: the provider's). */
  caFile: z.string().min(1).optional(),
});
export type UpstreamEndpointConfig = z.infer<typeof upstreamEndpointSchema>;

export const upstreamProviderSchema = z
  .strictObject({
    name: resourceName.max(32),
    type: z.literal('upstream'),
    /** Garbage-collection settings of this provider (docs/proxies.md#garbage-collection). */
    gc: providerGcSchema.optional(),
    /** Where the provider keeps its fronts' state; defaults to `<dataDir>/upstream/<name>`. */
    dataDir: z.string().min(1).optional(),
    endpoints: z.array(upstreamEndpointSchema).max(1000).default([]),
    /**
     * A file of further endpoints, one a line: `[name] URL` (`#` starts a comment). A URL here may
     * carry its password (the file is as private as a password file); without one, `passwordFile` applies.
     * Re-read when it changes.
     */
    endpointsFile: z.string().min(1).optional(),
    /**
     * A vendor's list endpoint: the same text as `endpointsFile`, fetched again once older than
     * `refresh` (default 5m), with `Authorization: Bearer <tokenFile's content>` when given.
     */
    endpointsUrl: z
      .strictObject({
        url: z.url({ protocol: /^https?$/ }),
        refresh: durationMs.default(300_000),
        tokenFile: z.string().min(1).optional(),
      })
      .optional(),
    /** The password of endpoints that name no `passwordFile` of their own. */
    passwordFile: z.string().min(1).optional(),
    /** The sticky-session username template of endpoints that name none of their own. */
    usernameTemplate: usernameTemplate.optional(),
    /** Extra certificate authorities of `https://` endpoints that name none of their own. */
    caFile: z.string().min(1).optional(),
    /** Labels every endpoint's Proxy gets (an endpoint's own win). */
    labels: z.record(labelKey, labelValue).default({}),
    /** As on every provider: the egress policy judges what crawlers ask for (never the upstream's own address). */
    proxies: z
      .strictObject({
        egressPolicy: egressPolicySchema.optional(),
      })
      .optional(),
  })
  .superRefine((config, ctx) => {
    const seen = new Set<string>();
    config.endpoints.forEach((e, i) => {
      if (seen.has(e.name)) ctx.addIssue({ code: 'custom', path: ['endpoints', i, 'name'], message: `endpoint "${e.name}" is listed twice` });
      seen.add(e.name);
    });
  });

export type UpstreamProviderConfig = z.infer<typeof upstreamProviderSchema>;

/** An upstream provider's data directory: its `dataDir`, else `<dataDir>/upstream/<name>`. */
export function upstreamDataDir(config: Pick<UpstreamProviderConfig, 'name' | 'dataDir'>, rootDataDir: string): string {
  return config.dataDir ?? join(rootDataDir, 'upstream', config.name);
}

/** The Proxy of an endpoint: `<provider>-<endpoint>`. */
export function endpointProxyName(provider: string, endpoint: string): string {
  return `${provider}-${endpoint}`;
}
