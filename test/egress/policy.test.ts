/**
 * The egress policy engine on its own: what a proxy decides for an address and port, given the
 * document and what it knows of its machine. The end-to-end proof through real proxies is
 * test/security/ssrf.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { egressGuards, egressPolicySchema, proxyEgressPolicy, type ProxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { parsePolicyDocument, PolicyDocumentError } from '../../src/egress/policy-document.ts';
import { compileEgressPolicy, type EgressRequest } from '../../src/egress/policy.ts';
import { checkEgress, EgressDeniedError } from '../../src/egress/enforce.ts';

const NONE = { localAddresses: [], resolved: new Map<string, readonly string[]>() };
const GET = (path: string): EgressRequest => ({ method: 'GET', path });

function doc(allow: string[] = [], deny: string[] = [], extra: Partial<ProxyEgressPolicy> = {}): ProxyEgressPolicy {
  const config = egressPolicySchema.parse({ allow, deny });
  return { ...proxyEgressPolicy(config, undefined), ...extra };
}

describe('default deny', () => {
  const policy = compileEgressPolicy(doc(), NONE);
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['169.254.10.1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['fc00::1', 'unique-local'],
    ['100.127.0.1', 'cgnat'],
    ['239.1.1.1', 'multicast'],
    ['ff05::2', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:0:a00:1', 'private'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['2002:c0a8:101::1', 'private'],
    ['::10.0.0.1', 'private'],
  ])('%s is refused: %s', (address, reason) => {
    expect(policy.judge(address, 80)).toEqual({ allowed: false, reason });
  });

  it.each(['8.8.8.8', '172.32.0.1', '100.128.0.1', '2001:4860:4860::8888', '::ffff:8.8.8.8', '2002:808:808::1'])('%s (public) is allowed', (address) => {
    expect(policy.judge(address, 443)).toEqual({ allowed: true, reason: 'allowed' });
  });

  it('refuses what is not an address at all (it should have been resolved first)', () => {
    expect(policy.judge('0x7f.1', 80)).toEqual({ allowed: false, reason: 'unresolvable' });
  });
});

describe('allow and deny', () => {
  it('allow opens a range of the default deny; deny wins over allow', () => {
    const policy = compileEgressPolicy(doc(['10.0.0.0/8', '127.0.0.1'], ['10.9.0.0/16']), NONE);
    expect(policy.judge('10.1.2.3', 80)).toEqual({ allowed: true, reason: 'allowed-range' });
    expect(policy.judge('::ffff:10.1.2.3', 80)).toEqual({ allowed: true, reason: 'allowed-range' });
    expect(policy.judge('127.0.0.1', 80)).toEqual({ allowed: true, reason: 'allowed-range' });
    expect(policy.judge('127.0.0.2', 80)).toEqual({ allowed: false, reason: 'loopback' });
    expect(policy.judge('10.9.1.1', 80)).toEqual({ allowed: false, reason: 'denied-range' });
    expect(policy.judge('::ffff:10.9.1.1', 80)).toEqual({ allowed: false, reason: 'denied-range' });
  });

  it('deny adds public ranges, in either family', () => {
    const policy = compileEgressPolicy(doc([], ['203.0.113.0/24', '2001:db8::/32']), NONE);
    expect(policy.judge('203.0.113.7', 80)).toEqual({ allowed: false, reason: 'denied-range' });
    expect(policy.judge('2001:db8::1', 80)).toEqual({ allowed: false, reason: 'denied-range' });
    expect(policy.judge('198.51.100.1', 80)).toEqual({ allowed: true, reason: 'allowed' });
  });
});

describe('a name with several addresses', () => {
  const policy = compileEgressPolicy(doc(['127.0.0.3/32']), NONE);
  const resolving =
    (...addresses: string[]) =>
    async () =>
      addresses.map((address) => ({ address, family: 4 }));
  const signal = (): AbortSignal => AbortSignal.timeout(5000);

  it('is refused when one address is denied, whichever comes first (not pinned to the allowed one)', async () => {
    for (const order of [
      ['127.0.0.3', '127.0.0.1'],
      ['127.0.0.1', '127.0.0.3'],
    ]) {
      const checked = checkEgress(() => policy, { hostname: 'split.example', port: 80 }, resolving(...order), signal());
      await expect(checked).rejects.toBeInstanceOf(EgressDeniedError);
      await expect(checked).rejects.toMatchObject({ reason: 'loopback' });
    }
  });

  it('is let through, pinned to its addresses, when every one is allowed; a name resolving to none is unresolvable', async () => {
    const lookup = await checkEgress(() => policy, { hostname: 'one.example', port: 80 }, resolving('127.0.0.3', '198.51.100.1'), signal());
    const all = await new Promise<unknown>((resolve) => lookup?.('one.example', { all: true }, (_err, list) => resolve(list)));
    expect(all).toEqual([
      { address: '127.0.0.3', family: 4 },
      { address: '198.51.100.1', family: 4 },
    ]);
    await expect(checkEgress(() => policy, { hostname: 'none.example', port: 80 }, resolving(), signal())).rejects.toMatchObject({ reason: 'unresolvable' });
  });
});

describe('guarded listeners', () => {
  const allowAll = ['0.0.0.0/0', '::/0'];

  it('are refused whatever allow says, on every spelling of this host', () => {
    const guards = egressGuards({ redisUrl: 'redis://127.0.0.1:6390', api: { host: '127.0.0.1', port: 8080 } });
    const policy = compileEgressPolicy({ ...doc(allowAll), guarded: [...guards.guarded] }, { localAddresses: ['192.0.2.10'], resolved: new Map() });
    for (const address of ['127.0.0.1', '127.0.0.2', '::1', '::ffff:127.0.0.1', '0.0.0.0', '::', '192.0.2.10']) {
      expect(policy.judge(address, 6390)).toEqual({ allowed: false, reason: 'guarded-listener' });
      expect(policy.judge(address, 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
      expect(policy.judge(address, 8081)).toEqual({ allowed: true, reason: 'allowed-range' });
    }
    expect(policy.judge('198.51.100.1', 8080)).toEqual({ allowed: true, reason: 'allowed-range' });
  });

  it('a wildcard host means that port on every local address', () => {
    const policy = compileEgressPolicy(
      { ...doc(allowAll), guarded: [{ host: '0.0.0.0', port: 9100, role: 'metrics' }] },
      { localAddresses: ['192.0.2.10', 'fe80::1'], resolved: new Map() },
    );
    expect(policy.judge('192.0.2.10', 9100)).toMatchObject({ allowed: false });
    expect(policy.judge('fe80::1%eth0', 9100)).toMatchObject({ allowed: false });
    expect(policy.judge('192.0.2.11', 9100)).toMatchObject({ allowed: true });
  });

  it('a host name is matched by its resolved addresses; unresolved, every address on its port is refused', () => {
    const guarded = [{ host: 'redis.internal', port: 6379, role: 'redis' as const }];
    const unresolved = compileEgressPolicy({ ...doc(allowAll), guarded }, NONE);
    expect(unresolved.hostNames).toEqual(['redis.internal']);
    expect(unresolved.judge('198.51.100.1', 6379)).toEqual({ allowed: false, reason: 'guarded-listener' });
    const resolved = compileEgressPolicy({ ...doc(allowAll), guarded }, { localAddresses: [], resolved: new Map([['redis.internal', ['198.51.100.7']]]) });
    expect(resolved.judge('198.51.100.7', 6379)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(resolved.judge('::ffff:198.51.100.7', 6379)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(resolved.judge('198.51.100.1', 6379)).toEqual({ allowed: true, reason: 'allowed-range' });
  });
});

describe('the echo exception', () => {
  const guards = egressGuards({ redisUrl: 'redis://127.0.0.1:6390', api: { host: '127.0.0.1', port: 8080 }, echoUrl: 'http://127.0.0.1:8080/v1/echo' });
  const policy = compileEgressPolicy(proxyEgressPolicy(undefined, guards), NONE);

  it('lets exactly a plain-HTTP GET of the echo path through, with the default policy', () => {
    expect(policy.judge('127.0.0.1', 8080, GET('/v1/echo'))).toEqual({ allowed: true, reason: 'echo' });
    expect(policy.judge('::ffff:127.0.0.1', 8080, GET('/v1/echo'))).toEqual({ allowed: true, reason: 'echo' });
  });

  it('refuses another method, path, query, port, or a CONNECT', () => {
    expect(policy.judge('127.0.0.1', 8080, { method: 'POST', path: '/v1/echo' })).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('127.0.0.1', 8080, GET('/v1/echo?x'))).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('127.0.0.1', 8080, GET('/v1/proxies'))).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('127.0.0.1', 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('127.0.0.1', 6390, GET('/v1/echo'))).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('127.0.0.1', 8081, GET('/v1/echo'))).toEqual({ allowed: false, reason: 'loopback' });
  });

  it('an echo host name that does not resolve gets no exception', () => {
    const named = egressGuards({ redisUrl: 'redis://127.0.0.1:6390', echoUrl: 'http://orchestrator.internal:8080/v1/echo' });
    const p = compileEgressPolicy(proxyEgressPolicy(undefined, named), NONE);
    expect(p.judge('198.51.100.1', 8080, GET('/v1/echo'))).toEqual({ allowed: false, reason: 'guarded-listener' });
    const resolved = compileEgressPolicy(proxyEgressPolicy(undefined, named), {
      localAddresses: [],
      resolved: new Map([['orchestrator.internal', ['198.51.100.1']]]),
    });
    expect(resolved.judge('198.51.100.1', 8080, GET('/v1/echo'))).toEqual({ allowed: true, reason: 'echo' });
  });
});

describe('the document a proxy receives', () => {
  it('round-trips what the orchestrator writes', () => {
    const guards = egressGuards({ redisUrl: 'redis://[::1]:6390', api: { host: '127.0.0.1', port: 8080 }, echoUrl: 'http://127.0.0.1:8080/v1/echo' });
    const written = proxyEgressPolicy(egressPolicySchema.parse({ allow: ['10.0.0.0/8'] }), guards);
    expect(parsePolicyDocument(JSON.stringify(written))).toEqual(written);
  });

  it.each([
    ['not json', /not JSON/],
    ['{"version":2}', /version/],
    ['{"version":1,"allow":["10.0.0.0/33"]}', /allow\.0/],
    ['{"version":1,"guarded":[{"host":"h","port":0,"role":"api"}]}', /guarded\.0\.port/],
  ])('rejects %s naming the field', (text, message) => {
    expect(() => parsePolicyDocument(text)).toThrow(PolicyDocumentError);
    expect(() => parsePolicyDocument(text)).toThrow(message);
  });
});
