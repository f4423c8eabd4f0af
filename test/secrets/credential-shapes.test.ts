/**
 * Tokens the registry was never told — a GCE access token minted from a service-account key or the
 * default credentials, a self-signed JWT, a Kubernetes exec plugin's token, one read from a file since
 * rotated — are still redacted where a peer quotes them back: by their shape.
 */
import { describe, expect, it } from 'vitest';
import { REDACTED, SecretRegistry } from '../../src/secrets/secret-registry.ts';
import { createLogger } from '../../src/logging.ts';
import { Writable } from 'node:stream';

const JWT = 'eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzYUBwLmlhbS5nc2VydmljZWFjY291bnQuY29tIn0.c2lnbmF0dXJl';

describe('credentials by shape', () => {
  const registry = new SecretRegistry();

  it.each([
    [
      'a quoted Authorization header',
      'invalid request (Authorization: Bearer ya29.a0AfH6SMBx-unknown_token): {}',
      `invalid request (Authorization: Bearer ${REDACTED}): {}`,
    ],
    ['a self-signed JWT', `authorization: bearer ${JWT}`, `authorization: bearer ${REDACTED}`],
    [
      'Basic credentials of a proxy the registry does not know',
      'Proxy-Authorization: Basic dXNlcjpzM2NyZXQtcGFzcw==',
      `Proxy-Authorization: Basic ${REDACTED}`,
    ],
    [
      'a token endpoint answer',
      '{"access_token":"ya29.c.b0Aaekm1K-minted","expires_in":3599,"id_token":"eyJhbGciOi.x.y-z"}',
      `{"access_token":"${REDACTED}","expires_in":3599,"id_token":"${REDACTED}"}`,
    ],
  ])('%s', (_what, text, expected) => {
    expect(registry.redact(text)).toBe(expected);
  });

  it('leaves prose and short words alone', () => {
    for (const text of ['the bearer of bad news', 'Basic auth is refused', 'scheme Bearer required', '"access_token":"short"']) {
      expect(registry.redact(text)).toBe(text);
    }
  });

  it('reaches every log line', () => {
    let out = '';
    const logger = createLogger({
      level: 'info',
      secrets: registry,
      destination: new Writable({ write: (c: Buffer, _e, done) => ((out += c.toString()), done()) }),
    });
    logger.warn({ err: 'upstream said: Authorization: Bearer ya29.rotated-away-token' }, 'request refused');
    expect(out).toContain(`Bearer ${REDACTED}`);
    expect(out).not.toContain('ya29.rotated-away-token');
  });
});
