/**
 * `host[:port]` of a Host header (or an `--allowed-host`), normalised by the URL parser; undefined
 * when it is not one (userinfo, a path, spaces, bad brackets…).
 */
export function parseAuthority(text: string): { hostname: string; port: string } | undefined {
  if (!/^[A-Za-z0-9._~-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(text)) return undefined;
  let u: URL;
  try {
    u = new URL(`http://${text}`);
  } catch {
    return undefined;
  }
  return { hostname: u.hostname, port: u.port || '80' };
}
