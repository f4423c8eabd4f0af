/**
 * The egress policy document every proxy reads (src/egress/policy-document.ts) field by field, and
 * the enforcement around the engine (src/egress/enforce.ts): the lookup a connection is pinned to,
 * the reason a refusal carries. Engine decisions are in test/egress/policy.test.ts, real proxies in
 * test/security/ssrf.test.ts. Written for the mutation run (docs/testing.md#mutation-testing).
 */
import type { LookupAddress } from 'node:dns';
import { describe, expect, test } from 'vitest';
import { checkEgress, EgressDeniedError, pinnedLookup } from '../../src/egress/enforce.ts';
import { parsePolicyDocument, PolicyDocumentError } from '../../src/egress/policy-document.ts';
import { compileEgressPolicy, NO_POLICY } from '../../src/egress/policy.ts';

const refused = (text: string): string => {
  try {
    parsePolicyDocument(text);
  } catch (err) {
    expect(err).toBeInstanceOf(PolicyDocumentError);
    expect(err).toMatchObject({ name: 'PolicyDocumentError' });
    return (err as Error).message;
  }
  throw new Error('the document was accepted');
};
const doc = (fields: Record<string, unknown>): string => JSON.stringify({ version: 1, ...fields });

describe('parsePolicyDocument', () => {
  test('the least document: version 1, everything else empty; unknown keys ignored', () => {
    expect(parsePolicyDocument('{"version":1,"later":true}')).toEqual({ version: 1, allow: [], deny: [], guarded: [] });
  });

  test('ranges are normalised; a bare address is /32 or /128', () => {
    expect(parsePolicyDocument(doc({ allow: ['10.0.0.0/8', '192.0.2.7', 'fd00::/8'], deny: ['2001:db8::1'] }))).toEqual({
      version: 1,
      allow: ['10.0.0.0/8', '192.0.2.7/32', 'fd00:0:0:0:0:0:0:0/8'],
      deny: ['2001:db8:0:0:0:0:0:1/128'],
      guarded: [],
    });
  });

  test('guarded listeners and the echo are kept as given', () => {
    const parsed = parsePolicyDocument(
      doc({
        guarded: [
          { host: 'redis.internal', port: 6379, role: 'redis' },
          { host: '::1', port: 1, role: 'proxy' },
          { host: 'h', port: 65535, role: 'metrics' },
        ],
        echo: { host: 'api.internal', port: 8080, path: '/v1/echo' },
      }),
    );
    expect(parsed.guarded).toEqual([
      { host: 'redis.internal', port: 6379, role: 'redis' },
      { host: '::1', port: 1, role: 'proxy' },
      { host: 'h', port: 65535, role: 'metrics' },
    ]);
    expect(parsed.echo).toEqual({ host: 'api.internal', port: 8080, path: '/v1/echo' });
  });

  test.each([
    ['[]', 'egress policy (document): expected an object'],
    ['null', 'egress policy (document): expected an object'],
    ['"text"', 'egress policy (document): expected an object'],
    ['{"version":"1"}', 'egress policy version: expected 1'],
    ['{}', 'egress policy version: expected 1'],
    [doc({ allow: '10.0.0.0/8' }), 'egress policy allow: expected an array'],
    [doc({ deny: {} }), 'egress policy deny: expected an array'],
    [doc({ guarded: 'x' }), 'egress policy guarded: expected an array'],
    [doc({ allow: [7] }), 'egress policy allow.0: expected a CIDR range'],
    [doc({ deny: ['10.0.0.0/8', 'nope'] }), 'egress policy deny.1: expected a CIDR range such as 10.0.0.0/8 or fd00::/8, got "nope"'],
    [doc({ guarded: [null] }), 'egress policy guarded.0: expected an object'],
    [doc({ guarded: [[]] }), 'egress policy guarded.0: expected an object'],
    [doc({ guarded: [{ host: 'h', port: 1, role: 'db' }] }), 'egress policy guarded.0.role: expected one of api, metrics, redis, proxy'],
    [doc({ guarded: [{ host: 'h', port: 1 }] }), 'egress policy guarded.0.role: expected one of api, metrics, redis, proxy'],
    [doc({ guarded: [{ host: '', port: 1, role: 'api' }] }), 'egress policy guarded.0.host: expected a host name or address'],
    [doc({ guarded: [{ host: 5, port: 1, role: 'api' }] }), 'egress policy guarded.0.host: expected a host name or address'],
    [doc({ guarded: [{ host: 'h'.repeat(254), port: 1, role: 'api' }] }), 'egress policy guarded.0.host: expected a host name or address'],
    [doc({ guarded: [{ host: 'h', port: 65536, role: 'api' }] }), 'egress policy guarded.0.port: expected a port 1-65535'],
    [doc({ guarded: [{ host: 'h', port: 1.5, role: 'api' }] }), 'egress policy guarded.0.port: expected a port 1-65535'],
    [doc({ guarded: [{ host: 'h', port: '80', role: 'api' }] }), 'egress policy guarded.0.port: expected a port 1-65535'],
    [doc({ echo: 'x' }), 'egress policy echo: expected an object'],
    [doc({ echo: { host: 'h', port: 80, path: 'echo' } }), 'egress policy echo.path: expected a path starting with /'],
    [doc({ echo: { host: 'h', port: 80 } }), 'egress policy echo.path: expected a path starting with /'],
    [doc({ echo: { host: 'h', port: 80, path: `/${'p'.repeat(2048)}` } }), 'egress policy echo.path: expected a path starting with /'],
    [doc({ echo: { host: 'h', port: 0, path: '/e' } }), 'egress policy echo.port: expected a port 1-65535'],
    [doc({ echo: { port: 80, path: '/e' } }), 'egress policy echo.host: expected a host name or address'],
  ])('%s is refused: %s', (text, message) => {
    expect(refused(text)).toBe(message);
  });

  test('text that is not JSON says so', () => {
    expect(refused('{')).toMatch(/^egress policy is not JSON: /);
  });

  test('a host of 253 characters and a path of 2048 are accepted', () => {
    const parsed = parsePolicyDocument(
      doc({ guarded: [{ host: 'h'.repeat(253), port: 1, role: 'api' }], echo: { host: 'e', port: 1, path: `/${'p'.repeat(2047)}` } }),
    );
    expect(parsed.guarded[0]?.host).toHaveLength(253);
    expect(parsed.echo?.path).toHaveLength(2048);
  });

  test('lists are bounded: 256 ranges, 64 guarded listeners', () => {
    const ranges = (n: number): string[] => Array.from({ length: n }, (_, i) => `10.${Math.floor(i / 256)}.${i % 256}.0/24`);
    expect(parsePolicyDocument(doc({ allow: ranges(256), deny: ranges(256) })).allow).toHaveLength(256);
    expect(refused(doc({ allow: ranges(257) }))).toBe('egress policy allow: at most 256 entries');
    expect(refused(doc({ deny: ranges(257) }))).toBe('egress policy deny: at most 256 entries');
    const guards = (n: number) => Array.from({ length: n }, (_, i) => ({ host: `h${i}`, port: 1, role: 'api' }));
    expect(parsePolicyDocument(doc({ guarded: guards(64) })).guarded).toHaveLength(64);
    expect(refused(doc({ guarded: guards(65) }))).toBe('egress policy guarded: at most 64 entries');
  });
});

describe('pinnedLookup', () => {
  const addresses: LookupAddress[] = [
    { address: '198.51.100.7', family: 4 },
    { address: '2001:db8::7', family: 6 },
  ];
  const lookup = (options: Record<string, unknown>): Promise<unknown[]> =>
    new Promise((resolve) => {
      pinnedLookup(addresses)('anything.example', options, (...args: unknown[]) => resolve(args));
    });

  test('answers the first pinned address whatever host is asked, or all of them', async () => {
    expect(await lookup({})).toEqual([null, '198.51.100.7', 4]);
    expect(await lookup({ all: true })).toEqual([null, addresses]);
  });

  test('a family narrows the answer, by number or by name', async () => {
    expect(await lookup({ family: 6 })).toEqual([null, '2001:db8::7', 6]);
    expect(await lookup({ family: 'IPv6' })).toEqual([null, '2001:db8::7', 6]);
    expect(await lookup({ family: 'IPv4', all: true })).toEqual([null, [addresses[0]]]);
    expect(await lookup({ family: 0, all: true })).toEqual([null, addresses]);
  });

  test('no pinned address of the family is ENOTFOUND naming it', async () => {
    const [err] = await new Promise<unknown[]>((resolve) => {
      pinnedLookup([addresses[0] as LookupAddress])('x', { family: 6 }, (...args: unknown[]) => resolve(args));
    });
    expect(err).toMatchObject({ code: 'ENOTFOUND', message: 'no allowed IPv6 address' });
  });
});

describe('checkEgress', () => {
  const policy = compileEgressPolicy(NO_POLICY, { localAddresses: [], resolved: new Map() });
  const signal = new AbortController().signal;
  const never = (): Promise<LookupAddress[]> => Promise.reject(new Error('an IP literal is not resolved'));

  test('an IP literal is judged as is and needs no pinning; a denied one names target and reason', async () => {
    expect(await checkEgress(() => policy, { hostname: '198.51.100.7', port: 443 }, never, signal)).toBeUndefined();
    expect(await checkEgress(() => policy, { hostname: '[2001:db8::7]', port: 443 }, never, signal)).toBeUndefined();
    const err = await checkEgress(() => policy, { hostname: '10.0.0.1', port: 80 }, never, signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EgressDeniedError);
    expect(err).toMatchObject({ reason: 'private', code: 'ERR_EGRESS_DENIED', retryable: false, message: 'egress to 10.0.0.1:80 denied: private' });
  });

  test('a name that fails to resolve is unresolvable', async () => {
    const err = await checkEgress(() => policy, { hostname: 'gone.example', port: 80 }, never, signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ reason: 'unresolvable', message: 'egress to gone.example:80 denied: unresolvable' });
  });

  test('a resolved name is pinned to exactly its judged addresses', async () => {
    const lookup = await checkEgress(
      () => policy,
      { hostname: 'ok.example', port: 80 },
      async () => [{ address: '198.51.100.9', family: 4 }],
      signal,
    );
    expect(lookup).toBeTypeOf('function');
    const answer = await new Promise<unknown[]>((resolve) => lookup?.('ok.example', {}, (...args: unknown[]) => resolve(args)));
    expect(answer).toEqual([null, '198.51.100.9', 4]);
  });
});
