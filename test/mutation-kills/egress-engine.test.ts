/**
 * The egress engine's address handling (src/egress/addresses.ts) and the corners of its order of
 * rules (src/egress/policy.ts) that test/egress/policy.test.ts leaves open: bracketed and zoned
 * literals, every IPv4-embedding IPv6 form, this machine's own addresses, deny on the written form,
 * the echo exception's every condition, and the host names handed to the resolver. Written for the
 * mutation run (docs/testing.md#mutation-testing).
 */
import { describe, expect, test } from 'vitest';
import { addressKey, effectiveAddress, inRange, parseAddress, parseRange } from '../../src/egress/addresses.ts';
import { DEFAULT_DENIED, DENY_REASONS } from '../../src/egress/default-ranges.ts';
import type { ProxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { compileEgressPolicy, NO_POLICY, type PolicyContext } from '../../src/egress/policy.ts';

const NONE: PolicyContext = { localAddresses: [], resolved: new Map() };
const effective = (text: string): string => {
  const a = parseAddress(text);
  if (!a) throw new Error(`${text} did not parse`);
  return addressKey(effectiveAddress(a));
};

describe('addresses', () => {
  test('only IP literals parse, with or without brackets and zone; other spellings are host names', () => {
    expect(parseAddress('192.0.2.1')?.toString()).toBe('192.0.2.1');
    expect(parseAddress('[2001:db8::1]')?.kind()).toBe('ipv6');
    expect(parseAddress('fe80::1%eth0')?.kind()).toBe('ipv6');
    for (const text of ['0x7f.1', '2130706433', '0177.0.0.1', '[192.0.2.1', '2001:db8::1]', 'example.com', '', '[]', '1.2.3'])
      expect(parseAddress(text), text).toBeUndefined();
  });

  test('every IPv4-embedding form is judged by its IPv4 address; :: and ::1 stay themselves', () => {
    expect(effective('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(effective('::192.0.2.1')).toBe('192.0.2.1');
    expect(effective('::ffff:0:c000:201')).toBe('192.0.2.1');
    expect(effective('64:ff9b::c000:201')).toBe('192.0.2.1');
    expect(effective('2002:c000:201::1')).toBe('192.0.2.1');
    expect(effective('2002:c000:201:ffff::')).toBe('192.0.2.1');
    expect(effective('::2')).toBe('0.0.0.2');
    expect(effective('::1')).toBe('::1');
    expect(effective('::')).toBe('::');
    expect(effective('2001:db8::c000:201')).toBe('2001:db8::c000:201');
    expect(effective('64:ff9b:1::c000:201')).toBe('64:ff9b:1::c000:201');
    expect(effective('198.51.100.1')).toBe('198.51.100.1');
  });

  test('the embedded address keeps every byte', () => {
    expect(effective('::ffff:ab:cdef')).toBe('0.171.205.239');
    expect(effective('2002:ff01:2fe::')).toBe('255.1.2.254');
  });

  test('a set key drops the zone and writes IPv6 the short way', () => {
    expect(addressKey(parseAddress('fe80::1%eth0') as never)).toBe('fe80::1');
    expect(addressKey(parseAddress('2001:0db8:0:0:0:0:0:0001') as never)).toBe('2001:db8::1');
  });

  test('a range matches only its own family', () => {
    const v4 = parseRange('10.0.0.0/8');
    expect(inRange(parseAddress('10.1.2.3') as never, v4)).toBe(true);
    expect(inRange(parseAddress('11.1.2.3') as never, v4)).toBe(false);
    expect(inRange(parseAddress('::ffff:10.1.2.3') as never, v4)).toBe(false);
  });

  test('the default deny table: every reason is documented and the metadata addresses come before their ranges', () => {
    for (const { reason } of DEFAULT_DENIED) expect(DENY_REASONS).toContain(reason);
    const at = (cidr: string): number => DEFAULT_DENIED.findIndex((d) => d.cidr === cidr);
    expect(at('169.254.169.254/32')).toBeLessThan(at('169.254.0.0/16'));
    expect(at('100.100.100.200/32')).toBeLessThan(at('100.64.0.0/10'));
  });
});

describe('the engine', () => {
  test('this machine’s own interface addresses are local for a wildcard guard, zones and mapped forms included', () => {
    const doc: ProxyEgressPolicy = { ...NO_POLICY, allow: ['0.0.0.0/0', '::/0'], guarded: [{ host: '0.0.0.0', port: 8080, role: 'api' }] };
    const policy = compileEgressPolicy(doc, { localAddresses: ['198.51.100.20', 'fe80::5%eth0', 'not-an-address'], resolved: new Map() });
    expect(policy.judge('198.51.100.20', 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('::ffff:198.51.100.20', 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('fe80::5', 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('127.0.0.5', 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('0.0.0.0', 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('::', 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('198.51.100.21', 8080)).toEqual({ allowed: true, reason: 'allowed-range' });
    expect(policy.judge('198.51.100.20', 8081)).toEqual({ allowed: true, reason: 'allowed-range' });
    expect(policy.hostNames).toEqual([]);
  });

  test('a guard on one non-local address covers only it', () => {
    const doc: ProxyEgressPolicy = { ...NO_POLICY, guarded: [{ host: '203.0.113.5', port: 6379, role: 'redis' }] };
    const policy = compileEgressPolicy(doc, { localAddresses: ['198.51.100.20'], resolved: new Map() });
    expect(policy.judge('203.0.113.5', 6379)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('203.0.113.6', 6379)).toEqual({ allowed: true, reason: 'allowed' });
    expect(policy.judge('198.51.100.20', 6379)).toEqual({ allowed: true, reason: 'allowed' });
  });

  test('a guard on a name resolved to a local address covers every local address; names are listed once for the resolver', () => {
    const doc: ProxyEgressPolicy = {
      ...NO_POLICY,
      allow: ['0.0.0.0/0'],
      guarded: [
        { host: 'api.internal', port: 8080, role: 'api' },
        { host: 'api.internal', port: 9464, role: 'metrics' },
        { host: 'redis.internal', port: 6379, role: 'redis' },
      ],
    };
    const resolved = new Map([
      ['api.internal', ['127.0.0.1', 'garbage']],
      ['redis.internal', []],
    ]);
    const policy = compileEgressPolicy(doc, { localAddresses: ['198.51.100.20'], resolved });
    expect(policy.hostNames).toEqual(['api.internal', 'redis.internal']);
    expect(policy.judge('198.51.100.20', 8080)).toEqual({ allowed: false, reason: 'guarded-listener' });
    expect(policy.judge('198.51.100.21', 8080)).toEqual({ allowed: true, reason: 'allowed-range' });
    // Resolved to nothing: every address on that port.
    expect(policy.judge('192.0.2.99', 6379)).toEqual({ allowed: false, reason: 'guarded-listener' });
  });

  test('deny also matches the address as written (an IPv6 range over mapped addresses)', () => {
    const doc: ProxyEgressPolicy = { ...NO_POLICY, deny: ['::ffff:198.51.100.0/120'] };
    const policy = compileEgressPolicy(doc, NONE);
    expect(policy.judge('::ffff:198.51.100.7', 443)).toEqual({ allowed: false, reason: 'denied-range' });
    expect(policy.judge('198.51.100.7', 443)).toEqual({ allowed: true, reason: 'allowed' });
  });

  test('allow is judged on the effective address', () => {
    const policy = compileEgressPolicy({ ...NO_POLICY, allow: ['10.0.0.0/8'] }, NONE);
    expect(policy.judge('::ffff:10.1.2.3', 80)).toEqual({ allowed: true, reason: 'allowed-range' });
    expect(policy.judge('10.1.2.3', 80)).toEqual({ allowed: true, reason: 'allowed-range' });
    expect(policy.judge('192.168.1.1', 80)).toEqual({ allowed: false, reason: 'private' });
  });

  test('the echo exception needs its port, a covered address, a GET and exactly its path', () => {
    const doc: ProxyEgressPolicy = {
      ...NO_POLICY,
      guarded: [{ host: '127.0.0.1', port: 8080, role: 'api' }],
      echo: { host: '127.0.0.1', port: 8080, path: '/v1/echo' },
    };
    const policy = compileEgressPolicy(doc, NONE);
    const echo = { allowed: true, reason: 'echo' };
    const guarded = { allowed: false, reason: 'guarded-listener' };
    expect(policy.judge('127.0.0.1', 8080, { method: 'GET', path: '/v1/echo' })).toEqual(echo);
    // A loopback echo host is this machine: any of its addresses is the same listener.
    expect(policy.judge('127.0.0.2', 8080, { method: 'GET', path: '/v1/echo' })).toEqual(echo);
    expect(policy.judge('127.0.0.1', 8080, { method: 'POST', path: '/v1/echo' })).toEqual(guarded);
    expect(policy.judge('127.0.0.1', 8080, { method: 'GET', path: '/v1/echo/' })).toEqual(guarded);
    expect(policy.judge('127.0.0.1', 8080)).toEqual(guarded);
    expect(policy.judge('127.0.0.1', 8081, { method: 'GET', path: '/v1/echo' })).toEqual({ allowed: false, reason: 'loopback' });
  });

  test('an echo on another machine’s address covers that address only', () => {
    const doc: ProxyEgressPolicy = { ...NO_POLICY, echo: { host: '10.0.0.1', port: 80, path: '/echo' } };
    const policy = compileEgressPolicy(doc, NONE);
    expect(policy.judge('10.0.0.1', 80, { method: 'GET', path: '/echo' })).toEqual({ allowed: true, reason: 'echo' });
    expect(policy.judge('10.0.0.2', 80, { method: 'GET', path: '/echo' })).toEqual({ allowed: false, reason: 'private' });
  });

  test('an echo on a name: the exception only once the name resolves, and then only on its addresses', () => {
    const doc: ProxyEgressPolicy = { ...NO_POLICY, echo: { host: 'api.example', port: 80, path: '/echo' } };
    expect(compileEgressPolicy(doc, NONE).hostNames).toEqual(['api.example']);
    const unresolved = compileEgressPolicy(doc, NONE);
    expect(unresolved.judge('198.51.100.1', 80, { method: 'GET', path: '/echo' })).toEqual({ allowed: true, reason: 'allowed' });
    expect(unresolved.judge('10.0.0.1', 80, { method: 'GET', path: '/echo' })).toEqual({ allowed: false, reason: 'private' });
    const resolved = compileEgressPolicy(doc, { localAddresses: [], resolved: new Map([['api.example', ['10.0.0.1']]]) });
    expect(resolved.judge('10.0.0.1', 80, { method: 'GET', path: '/echo' })).toEqual({ allowed: true, reason: 'echo' });
    expect(resolved.judge('10.0.0.2', 80, { method: 'GET', path: '/echo' })).toEqual({ allowed: false, reason: 'private' });
  });
});
