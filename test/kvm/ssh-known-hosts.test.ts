import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DialError, sshErrorStage } from '../../src/kvm/dial.ts';
import { fingerprint, hostKeyAlgorithmsFor, knownHostsName, parseKnownHosts, verifyHostKey } from '../../src/kvm/ssh/known-hosts.ts';
import { generateKeyPair } from '../fakes/ssh/index.ts';

const keyA = generateKeyPair().publicKey.split(' ').slice(0, 2).join(' ');
const keyB = generateKeyPair().publicKey.split(' ').slice(0, 2).join(' ');
const blob = (k: string): Buffer => Buffer.from(k.split(' ')[1]!, 'base64');

describe('known_hosts', () => {
  it('names hosts the way OpenSSH looks them up', () => {
    expect(knownHostsName('10.0.0.5', 22)).toBe('10.0.0.5');
    expect(knownHostsName('10.0.0.5', 2222)).toBe('[10.0.0.5]:2222');
  });

  it('matches plain patterns, wildcards and negation, case-insensitively', () => {
    const entries = parseKnownHosts(`# comment\n\nbeelink,10.0.0.5 ${keyA}\n*.lab,!bad.lab ${keyB}\n[10.0.0.*]:2222 ${keyB}\n`);
    expect(verifyHostKey(entries, 'BEELINK', blob(keyA)).ok).toBe(true);
    expect(verifyHostKey(entries, '10.0.0.5', blob(keyA)).ok).toBe(true);
    expect(verifyHostKey(entries, 'h.lab', blob(keyB)).ok).toBe(true);
    expect(verifyHostKey(entries, 'bad.lab', blob(keyB))).toMatchObject({ ok: false, reason: 'unknown' });
    expect(verifyHostKey(entries, '[10.0.0.7]:2222', blob(keyB)).ok).toBe(true);
    // A port-22 entry does not vouch for another port.
    expect(verifyHostKey(entries, '[10.0.0.5]:2222', blob(keyA))).toMatchObject({ ok: false, reason: 'mismatch' });
  });

  it('compares key type and bytes: another key for a known host is a mismatch', () => {
    const entries = parseKnownHosts(`[127.0.0.1]:2222 ${keyA}\n`);
    const verdict = verifyHostKey(entries, '[127.0.0.1]:2222', blob(keyB));
    expect(verdict).toMatchObject({ ok: false, reason: 'mismatch', keyType: 'ssh-ed25519', fingerprint: fingerprint(blob(keyB)) });
  });

  it('verifies hashed entries and refuses revoked keys', () => {
    const salt = Buffer.alloc(20, 7);
    const hash = createHmac('sha1', salt).update('[h]:2200').digest('base64');
    const entries = parseKnownHosts(`|1|${salt.toString('base64')}|${hash} ${keyA}\n@revoked * ${keyB}\nh ${keyB}\n`);
    expect(verifyHostKey(entries, '[h]:2200', blob(keyA)).ok).toBe(true);
    expect(verifyHostKey(entries, '[h]:2201', blob(keyA))).toMatchObject({ ok: false });
    expect(verifyHostKey(entries, 'h', blob(keyB))).toMatchObject({ ok: false, reason: 'revoked' });
  });

  it('skips malformed lines and entries whose declared type differs from the key blob', () => {
    const entries = parseKnownHosts(`garbage\nhost ssh-rsa ${keyA.split(' ')[1]}\nhost\n`);
    expect(entries).toHaveLength(0);
  });

  it('offers only the host key algorithms known for the host', () => {
    const entries = parseKnownHosts(`h ${keyA}\nother ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ==\n`);
    expect(hostKeyAlgorithmsFor(entries, 'h')).toEqual(['ssh-ed25519']);
    expect(hostKeyAlgorithmsFor(entries, 'nobody')).toBeUndefined();
  });
});

describe('dial stage from ssh2 error levels', () => {
  const withLevel = (level?: string): Error => Object.assign(new Error('x'), level ? { level } : {});
  it('socket, DNS and timeout errors are tcp before the connection is up and ssh-handshake after', () => {
    for (const level of ['client-socket', 'client-dns', 'client-timeout']) {
      expect(sshErrorStage(withLevel(level), false)).toBe('tcp');
      expect(sshErrorStage(withLevel(level), true)).toBe('ssh-handshake');
    }
  });
  it('handshake, authentication and protocol errors are always ssh-handshake', () => {
    for (const level of ['handshake', 'client-authentication', 'protocol']) expect(sshErrorStage(withLevel(level), false)).toBe('ssh-handshake');
  });
  it('a DialError keeps the original message and cause', () => {
    const cause = withLevel('handshake');
    const err = new DialError('ssh-handshake', 'h', cause);
    expect(err.message).toBe('x');
    expect(err.cause).toBe(cause);
    expect(err.retryable).toBe(true);
  });
});
