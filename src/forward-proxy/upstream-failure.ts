/** Why a destination the policy admitted could not be reached, as the client is told. */
export interface UpstreamFailure {
  /** 502 (refused, reset, unreachable, not resolvable) or 504 (no answer in time). */
  status: 502 | 504;
  /**
   * A stable word for logs and the answer's body: `refused`, `reset`, `timeout`, `unreachable`,
   * `unresolvable`, `error`; through an upstream proxy also `upstream-auth` (it refused our
   * credentials), `upstream-refused` (it would not go on), `upstream-tls` (its TLS failed).
   */
  kind: 'refused' | 'reset' | 'timeout' | 'unreachable' | 'unresolvable' | 'error' | 'upstream-auth' | 'upstream-refused' | 'upstream-tls';
}

const BY_CODE: Record<string, UpstreamFailure> = {
  ECONNREFUSED: { status: 502, kind: 'refused' },
  ECONNRESET: { status: 502, kind: 'reset' },
  EPIPE: { status: 502, kind: 'reset' },
  ECONNABORTED: { status: 502, kind: 'reset' },
  ETIMEDOUT: { status: 504, kind: 'timeout' },
  EHOSTUNREACH: { status: 502, kind: 'unreachable' },
  ENETUNREACH: { status: 502, kind: 'unreachable' },
  EADDRNOTAVAIL: { status: 502, kind: 'unreachable' },
  ENOTFOUND: { status: 502, kind: 'unresolvable' },
  EAI_AGAIN: { status: 502, kind: 'unresolvable' },
  // undici's (direct-request.ts): the origin closed the connection under the request, or said nothing in time.
  UND_ERR_SOCKET: { status: 502, kind: 'reset' },
  UND_ERR_HEADERS_TIMEOUT: { status: 504, kind: 'timeout' },
  UND_ERR_BODY_TIMEOUT: { status: 504, kind: 'timeout' },
  UND_ERR_CONNECT_TIMEOUT: { status: 504, kind: 'timeout' },
  // An upstream proxy's answers (chain-connect.ts).
  EPROXYAUTH: { status: 502, kind: 'upstream-auth' },
  EPROXYREFUSED: { status: 502, kind: 'upstream-refused' },
  EPROXYPROTO: { status: 502, kind: 'error' },
};

/** TLS failures toward an https:// upstream proxy: node's and OpenSSL's codes. */
function isTlsCode(code: string): boolean {
  return code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_') || code.includes('CERT') || code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' || code === 'EPROTO';
}

/** The failure an upstream socket's error stands for (its `code`, never its message). */
export function upstreamFailure(err: unknown): UpstreamFailure {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== undefined && BY_CODE[code] === undefined && isTlsCode(code)) return { status: 502, kind: 'upstream-tls' };
  return (code !== undefined ? BY_CODE[code] : undefined) ?? { status: 502, kind: 'error' };
}

/** An upstream that said nothing for too long: reported as ETIMEDOUT, whatever timer noticed it. */
export function upstreamTimeout(what: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${what} timed out`), { code: 'ETIMEDOUT' });
}
