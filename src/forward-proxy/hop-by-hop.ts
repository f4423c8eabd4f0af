/**
 * Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus the proxy's own
 * `Proxy-*` headers: a forward proxy drops them in both directions, together with every header the
 * `Connection` header names.
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** The names a `Connection` header lists (lower case), besides the fixed hop-by-hop set. */
function connectionTokens(raw: readonly string[]): Set<string> | undefined {
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if ((raw[i] ?? '').toLowerCase() !== 'connection') continue;
    for (const token of (raw[i + 1] ?? '').split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '') (named ??= new Set()).add(name);
    }
  }
  return named;
}

/**
 * `raw` (node's `rawHeaders`: name, value, name, value…) without hop-by-hop headers and without
 * the names in `drop` (lower case), case and order kept, repeated headers kept apart.
 */
export function endToEndHeaders(raw: readonly string[], drop?: ReadonlySet<string>): string[] {
  const named = connectionTokens(raw);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named?.has(lower) || drop?.has(lower)) continue;
    out.push(name, raw[i + 1] ?? '');
  }
  return out;
}
