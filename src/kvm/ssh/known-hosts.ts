/**
 * OpenSSH known_hosts files: parsing, host lookup and host key verification.
 *
 * Supported: plain host patterns (comma-separated, `*` and `?` wildcards, `!` negation,
 * case-insensitive), `[host]:port` entries for ports other than 22, hashed `|1|salt|hmac`
 * entries (HMAC-SHA1 of the host string keyed by the salt) and `@revoked` lines.
 * `@cert-authority` lines are skipped: host certificates are not supported.
 */
import { createHmac, timingSafeEqual, createHash } from 'node:crypto';

export interface KnownHostEntry {
  marker: 'revoked' | undefined;
  /** Comma-separated patterns as written, or undefined for a hashed entry. */
  patterns: string[] | undefined;
  hashed: { salt: Buffer; hash: Buffer } | undefined;
  keyType: string;
  /** The key blob (SSH wire format), decoded from base64. */
  key: Buffer;
  line: number;
}

/** Parses a known_hosts file; lines that are not entries (comments, blanks, garbage) are skipped. */
export function parseKnownHosts(text: string): KnownHostEntry[] {
  const entries: KnownHostEntry[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fields = (lines[i] ?? '').trim().split(/\s+/);
    if (fields.length === 0 || fields[0] === '' || fields[0]!.startsWith('#')) continue;
    let marker: KnownHostEntry['marker'];
    if (fields[0]!.startsWith('@')) {
      const m = fields.shift()!;
      if (m === '@revoked') marker = 'revoked';
      else continue; // @cert-authority and unknown markers
    }
    const [hosts, keyType, keyB64] = fields;
    if (!hosts || !keyType || !keyB64) continue;
    const key = Buffer.from(keyB64, 'base64');
    if (key.length === 0 || blobKeyType(key) !== keyType) continue;
    let hashed: KnownHostEntry['hashed'];
    let patterns: string[] | undefined;
    if (hosts.startsWith('|1|')) {
      const [salt, hash] = hosts.slice(3).split('|');
      if (!salt || !hash) continue;
      hashed = { salt: Buffer.from(salt, 'base64'), hash: Buffer.from(hash, 'base64') };
    } else {
      patterns = hosts.split(',').filter((p) => p.length > 0);
    }
    entries.push({ marker, patterns, hashed, keyType, key, line: i + 1 });
  }
  return entries;
}

/** The name OpenSSH looks up: `host` on port 22, `[host]:port` otherwise. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** Whether `entry` names `hostName` (as produced by knownHostsName). */
export function entryMatchesHost(entry: KnownHostEntry, hostName: string): boolean {
  if (entry.hashed) {
    const mac = createHmac('sha1', entry.hashed.salt).update(hostName).digest();
    return mac.length === entry.hashed.hash.length && timingSafeEqual(mac, entry.hashed.hash);
  }
  const name = hostName.toLowerCase();
  let matched = false;
  for (const raw of entry.patterns ?? []) {
    const negated = raw.startsWith('!');
    const pattern = (negated ? raw.slice(1) : raw).toLowerCase();
    if (wildcardMatch(pattern, name)) {
      if (negated) return false;
      matched = true;
    }
  }
  return matched;
}

function wildcardMatch(pattern: string, text: string): boolean {
  // Iterative glob with backtracking over the last `*`.
  let p = 0;
  let t = 0;
  let star = -1;
  let mark = 0;
  while (t < text.length) {
    if (p < pattern.length && (pattern[p] === '?' || pattern[p] === text[t])) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      mark = t;
    } else if (star >= 0) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}

/** The key type named inside an SSH public key blob (its first string), or undefined. */
export function blobKeyType(blob: Buffer): string | undefined {
  if (blob.length < 4) return undefined;
  const len = blob.readUInt32BE(0);
  if (len === 0 || len > 64 || 4 + len > blob.length) return undefined;
  return blob.toString('latin1', 4, 4 + len);
}

/** OpenSSH's `SHA256:…` fingerprint of a key blob. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

export type HostKeyVerdict =
  { ok: true; line: number } | { ok: false; reason: 'unknown' | 'mismatch' | 'revoked'; keyType: string | undefined; fingerprint: string };

/**
 * Verifies a server host key blob against the entries for `hostName`: a revoked key is refused;
 * otherwise the key must equal (type and bytes) a key listed for the host. No entry for the host
 * is `unknown`; entries that all differ are `mismatch`.
 */
export function verifyHostKey(entries: readonly KnownHostEntry[], hostName: string, blob: Buffer): HostKeyVerdict {
  const keyType = blobKeyType(blob);
  const fp = fingerprint(blob);
  const forHost = entries.filter((e) => entryMatchesHost(e, hostName));
  if (forHost.some((e) => e.marker === 'revoked' && e.key.equals(blob))) return { ok: false, reason: 'revoked', keyType, fingerprint: fp };
  const candidates = forHost.filter((e) => e.marker === undefined);
  const hit = candidates.find((e) => e.keyType === keyType && e.key.equals(blob));
  if (hit) return { ok: true, line: hit.line };
  return { ok: false, reason: candidates.length === 0 ? 'unknown' : 'mismatch', keyType, fingerprint: fp };
}

const HOST_KEY_ALGORITHMS: Record<string, readonly string[]> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
  'ssh-dss': ['ssh-dss'],
};

/**
 * The host key algorithms to offer so that the server presents a key type we know for this
 * host (as OpenSSH does), or undefined to keep ssh2's defaults (no usable entry).
 */
export function hostKeyAlgorithmsFor(entries: readonly KnownHostEntry[], hostName: string): string[] | undefined {
  const algorithms = new Set<string>();
  for (const e of entries) {
    if (e.marker !== undefined || !entryMatchesHost(e, hostName)) continue;
    for (const a of HOST_KEY_ALGORITHMS[e.keyType] ?? []) algorithms.add(a);
  }
  return algorithms.size > 0 ? [...algorithms] : undefined;
}
