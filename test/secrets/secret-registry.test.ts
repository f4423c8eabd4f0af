import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging.ts';
import { EgressError } from '../../src/errors.ts';
import { ProvisioningError } from '../../src/providers/lifecycle.ts';
import { redactError } from '../../src/secrets/redact-error.ts';
import { REDACTED, SecretRegistry } from '../../src/secrets/secret-registry.ts';
import { redactedSpan, redactingExporter } from '../../src/telemetry/redacting-exporter.ts';
import { generateCredentials } from '../../src/model/proxy-credentials.ts';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-node';

const PASSWORD = 'p&ss<w"rd>/+=é 1';
const USER = 'egress-web';

function registry(): SecretRegistry {
  const r = new SecretRegistry();
  r.setCredentials('proxy:web', { username: USER, password: PASSWORD });
  return r;
}

describe('the secret registry', () => {
  it.each([
    ['as it is', PASSWORD],
    ['percent-encoded', encodeURIComponent(PASSWORD)],
    ['JSON-escaped', JSON.stringify(PASSWORD).slice(1, -1)],
    ['XML-escaped', PASSWORD.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')],
    ['base64', Buffer.from(PASSWORD).toString('base64')],
    ['base64url', Buffer.from(PASSWORD).toString('base64url')],
    ['as Basic auth (user:password, base64)', Buffer.from(`${USER}:${PASSWORD}`).toString('base64')],
    ['in a URL', `http://${USER}:${encodeURIComponent(PASSWORD)}@10.0.0.1:3128`],
  ])('redacts the password %s', (_how, form) => {
    const out = registry().redact(`before ${form} after`);
    expect(out).toContain(REDACTED);
    expect(out).not.toContain(form);
    expect(out.startsWith('before ')).toBe(true);
    expect(out.endsWith(' after')).toBe(true);
  });

  it('redacts every occurrence and leaves other text as it is', () => {
    const r = registry();
    expect(r.redact(`a ${PASSWORD} b ${PASSWORD}`)).toBe(`a ${REDACTED} b ${REDACTED}`);
    expect(r.redact('nothing secret here')).toBe('nothing secret here');
  });

  it('a JSON line with the password inside a string is redacted and stays JSON', () => {
    const line = JSON.stringify({ msg: `refused: ${PASSWORD}` });
    expect(JSON.parse(registry().redact(line))).toEqual({ msg: `refused: ${REDACTED}` });
  });

  it('values shorter than 4 characters are not secrets (they would redact every message)', () => {
    const r = new SecretRegistry();
    r.set('short', ['abc', 'a', '']);
    expect(r.size).toBe(0);
    expect(r.redact('abc a abcabc')).toBe('abc a abcabc');
    r.set('ok', ['abcd']);
    expect(r.redact('x abcd y')).toBe(`x ${REDACTED} y`);
  });

  it('a message cut inside a secret has the cut secret redacted too', () => {
    const r = registry();
    expect(r.redact(`error: ${PASSWORD.slice(0, 6)}…`)).toBe(`error: ${REDACTED}…`);
    expect(r.redact(`error: ${PASSWORD.slice(0, 6)}`)).toBe(`error: ${REDACTED}`);
    // Fewer than 4 characters of it left: not taken for it.
    expect(r.redact(`error: ${PASSWORD.slice(0, 3)}`)).toBe(`error: ${PASSWORD.slice(0, 3)}`);
  });

  it('an owner set again replaces its secrets; forgotten, they are no longer redacted', () => {
    const r = new SecretRegistry();
    r.set('token', ['first-token']);
    r.set('token', ['second-token']);
    expect(r.redact('first-token second-token')).toBe(`first-token ${REDACTED}`);
    r.forget('token');
    expect(r.redact('second-token')).toBe('second-token');
  });

  it('the longest matching form wins (Basic credentials over the password inside them)', () => {
    const r = new SecretRegistry();
    r.set('a', ['secret', 'secret-and-more']);
    expect(r.redact('x secret-and-more y')).toBe(`x ${REDACTED} y`);
  });

  it('finds any proxy’s password among thousands, in plain text and in Basic auth', () => {
    const r = new SecretRegistry();
    const all = Array.from({ length: 5000 }, (_, i) => generateCredentials(`p${i}`));
    all.forEach((c, i) => r.setCredentials(`proxy:p${i}`, c));
    const c = all[4321]!;
    const basic = Buffer.from(`${c.username}:${c.password}`).toString('base64');
    expect(r.redact(`${c.username}:${c.password} Basic ${basic} egress-p1`)).toBe(`${c.username}:${REDACTED} Basic ${REDACTED} egress-p1`);
  });

  it('a base64 blob that carries the password (a user-data) is redacted whole', () => {
    const blob = Buffer.from(`#cloud-config\nwrite_files:\n- content: PROXY_PASSWORD=${PASSWORD}\n`).toString('base64');
    expect(registry().redact(`user-data: ${blob}.`)).toBe(`user-data: ${REDACTED}.`);
    // Ordinary long words are runs of the alphabet too, and stay.
    expect(registry().redact('connection refused: ECONNREFUSED 10.0.0.1')).toBe('connection refused: ECONNREFUSED 10.0.0.1');
  });
});

describe('redactError', () => {
  it('redacts message, stack, string fields and causes in place, keeping class, code and retry data', () => {
    const r = registry();
    const cause = Object.assign(new Error(`daemon said ${PASSWORD}`), { remote: { message: `xml ${PASSWORD}`, code: 27 }, detail: PASSWORD });
    const err = new ProvisioningError(`define failed: ${PASSWORD}`, { cause });
    const out = redactError(err, r);
    expect(out).toBe(err);
    expect(out).toBeInstanceOf(ProvisioningError);
    expect(err.message).toBe(`define failed: ${REDACTED}`);
    expect(err.stack).not.toContain(PASSWORD);
    expect(cause.message).toBe(`daemon said ${REDACTED}`);
    expect(JSON.stringify(cause)).not.toContain(PASSWORD);
    const retry = new EgressError('ERR_X', `x ${PASSWORD}`, { retryable: false });
    redactError(retry, r);
    expect(retry).toMatchObject({ code: 'ERR_X', retryable: false, message: `x ${REDACTED}` });
  });
});

describe('log lines', () => {
  it('never carry a registered secret, whatever key or error it is under (the Redis password, an API token)', () => {
    const r = new SecretRegistry();
    r.set('redis', ['redis-password-0d9f']);
    r.set('api-tokens', ['api-token-77aa']);
    let out = '';
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        out += chunk.toString('utf8');
        done();
      },
    });
    const logger = createLogger({ level: 'info', secrets: r, destination });
    logger.warn({ err: new Error('connect ECONNREFUSED redis://:redis-password-0d9f@10.0.0.5:6379') }, 'redis connection error');
    logger.info({ detail: 'Authorization: Bearer api-token-77aa' }, 'request with api-token-77aa');
    expect(out).not.toContain('redis-password-0d9f');
    expect(out).not.toContain('api-token-77aa');
    expect(out).toContain(`redis://:${REDACTED}@10.0.0.5:6379`);
    for (const line of out.trim().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });
});

describe('spans', () => {
  it('are exported with name, attributes, status message and exception events redacted', () => {
    const r = registry();
    const span = {
      name: `call ${PASSWORD}`,
      attributes: { 'http.url': `http://u:${encodeURIComponent(PASSWORD)}@h`, n: 1, list: [PASSWORD, 'x'] },
      status: { code: 2, message: `failed: ${PASSWORD}` },
      events: [{ name: 'exception', time: [0, 0], attributes: { 'exception.message': `boom ${PASSWORD}` } }],
      spanContext: () => ({ traceId: 't', spanId: 's', traceFlags: 1 }),
      kind: 0,
    } as unknown as ReadableSpan;
    const view = redactedSpan(span, r);
    expect(JSON.stringify({ n: view.name, a: view.attributes, s: view.status, e: view.events })).not.toContain(PASSWORD);
    expect(JSON.stringify(view.attributes)).not.toContain(encodeURIComponent(PASSWORD));
    expect(view.attributes.n).toBe(1);
    expect(view.spanContext().spanId).toBe('s');
    expect(view.kind).toBe(0);
  });

  it('are exported through the redaction as the registry stands at each export: a token rotated between two exports is redacted in the second', () => {
    const r = new SecretRegistry();
    r.set('api-tokens', ['token-old-5d1c9a']);
    const exported: ReadableSpan[][] = [];
    const inner: SpanExporter = { export: (spans, done) => (exported.push(spans), done({ code: 0 })), shutdown: () => Promise.resolve() };
    const exporter = redactingExporter(inner, r);
    const quoting = (token: string): ReadableSpan =>
      ({
        name: 'kubernetes GET',
        attributes: { 'server.address': 'api.example', note: `sent ${token}` },
        status: { code: 2, message: `401 for ${token}` },
        events: [],
        spanContext: () => ({ traceId: 't', spanId: 's', traceFlags: 1 }),
        kind: 2,
      }) as unknown as ReadableSpan;
    const texts = (spans: readonly ReadableSpan[] | undefined): string => JSON.stringify((spans ?? []).map((s) => [s.name, s.attributes, s.status]));

    exporter.export([quoting('token-old-5d1c9a'), quoting('token-new-8e2f7b'), quoting('token-old-5d1c9a')], () => undefined);
    expect(texts(exported[0])).not.toContain('token-old-5d1c9a');
    // Not told yet: nothing can redact it.
    expect(texts(exported[0])).toContain('token-new-8e2f7b');

    r.set('api-tokens', ['token-new-8e2f7b']);
    exporter.export([quoting('token-new-8e2f7b'), quoting('token-new-8e2f7b')], () => undefined);
    expect(texts(exported[1])).not.toContain('token-new-8e2f7b');
    expect(exported[1]?.[1]?.attributes.note).toBe(`sent ${REDACTED}`);
    expect(exported[1]?.[0]?.spanContext().spanId).toBe('s');
  });

  it('pass a span holding nothing to redact to the exporter as it is', () => {
    const span = {
      name: 'process checks',
      attributes: { 'bullmq.job.id': '17', n: 2, list: ['a', 'b'] },
      status: { code: 0 },
      events: [{ name: 'job completed', time: [0, 0], attributes: {} }],
      spanContext: () => ({ traceId: 't', spanId: 's', traceFlags: 1 }),
      kind: 5,
    } as unknown as ReadableSpan;
    expect(redactedSpan(span, registry())).toBe(span);
  });
});
