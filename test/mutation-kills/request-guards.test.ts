/**
 * The API's request guards (src/http/request-guards.ts) on a bare Hono app, in process: the body
 * limit, the Host allow list, the same-origin rule and the media types of mutating requests — each
 * refusal with its status and JSON body. The same guards on a real listener are in test/api/. Written
 * for the mutation run (docs/testing.md#mutation-testing).
 */
import { Hono } from 'hono';
import { describe, expect, test } from 'vitest';
import {
  HostAllowList,
  limitBody,
  MUTATION_MEDIA_TYPES,
  requireAllowedHost,
  requireMutationMediaType,
  requireSameOrigin,
} from '../../src/http/request-guards.ts';

function app(...guards: Parameters<Hono['use']>[1][]): Hono {
  const a = new Hono();
  for (const g of guards) a.use('*', g);
  a.all('/things', async (c) => c.json({ read: (await c.req.text()).length }));
  return a;
}

async function answer(res: Response): Promise<[number, unknown]> {
  return [res.status, await res.json()];
}

describe('limitBody', () => {
  const limited = app(limitBody(1024));

  test('a body over the limit is 413 naming the limit and the flag; one at the limit passes', async () => {
    expect(await answer(await limited.request('/things', { method: 'POST', body: 'x'.repeat(1025) }))).toEqual([
      413,
      { error: 'ERR_BODY_TOO_LARGE', message: 'the request body is larger than 1024 bytes (--max-body-size)' },
    ]);
    expect(await answer(await limited.request('/things', { method: 'PUT', body: 'x'.repeat(1024) }))).toEqual([200, { read: 1024 }]);
  });

  test('a chunked body (no declared length) is cut at the limit too', async () => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 3; i++) controller.enqueue(new Uint8Array(600));
        controller.close();
      },
    });
    const res = await limited.request('/things', { method: 'POST', body, duplex: 'half' });
    expect(res.status).toBe(413);
  });

  test('GET and HEAD pass untouched, whatever length they declare', async () => {
    const get = await limited.request('/things', { method: 'GET', headers: { 'content-length': '999999' } });
    expect(get.status).toBe(200);
    const head = await limited.request('/things', { method: 'HEAD', headers: { 'content-length': '999999' } });
    expect(head.status).toBe(200);
  });

  test('DELETE and PATCH are limited like POST', async () => {
    expect((await limited.request('/things', { method: 'DELETE', body: 'x'.repeat(2000) })).status).toBe(413);
    expect((await limited.request('/things', { method: 'PATCH', body: 'x'.repeat(2000) })).status).toBe(413);
  });
});

describe('HostAllowList', () => {
  test('localhost on any port, the bound address with its port, and --allowed-host names', () => {
    const hosts = new HostAllowList(['egress.local', 'api.example:8080', 'not a host']);
    expect(hosts.allows(undefined)).toBe(false);
    expect(hosts.allows('localhost:1234')).toBe(true);
    expect(hosts.allows('localhost')).toBe(true);
    expect(hosts.allows('127.0.0.1:7777')).toBe(false);
    hosts.bind('127.0.0.1', 7777);
    expect(hosts.allows('127.0.0.1:7777')).toBe(true);
    expect(hosts.allows('127.0.0.1:7778')).toBe(false);
    expect(hosts.allows('127.0.0.2:7777')).toBe(false);
    expect(hosts.allows('egress.local')).toBe(true);
    expect(hosts.allows('egress.local:9999')).toBe(true);
    expect(hosts.allows('api.example:8080')).toBe(true);
    expect(hosts.allows('api.example')).toBe(false);
    expect(hosts.allows('api.example:8081')).toBe(false);
    expect(hosts.allows('evil.example')).toBe(false);
    expect(hosts.allows('not a host')).toBe(false);
    expect(hosts.allows('user@localhost')).toBe(false);
  });

  test('an IPv6 bind is matched in brackets', () => {
    const hosts = new HostAllowList([]);
    hosts.bind('::1', 8080);
    expect(hosts.allows('[::1]:8080')).toBe(true);
    expect(hosts.allows('[::1]:8081')).toBe(false);
  });

  test('an allowed name with port 80 matches a Host without a port', () => {
    const hosts = new HostAllowList(['egress.local:80']);
    expect(hosts.allows('egress.local')).toBe(true);
  });
});

describe('requireAllowedHost', () => {
  test('another Host is 403 naming it and the flags', async () => {
    const hosts = new HostAllowList([]);
    const a = app(requireAllowedHost(hosts));
    expect(await answer(await a.request('/things', { headers: { host: 'rebind.example' } }))).toEqual([
      403,
      {
        error: 'ERR_HOST_NOT_ALLOWED',
        message:
          'Host "rebind.example" is not an address of this API; without --api-token-file it answers only to its own address and localhost (add names with --allowed-host)',
      },
    ]);
    expect((await a.request('/things', { headers: { host: 'localhost:3000' } })).status).toBe(200);
  });

  test('a very long Host is cut to 100 characters in the message', async () => {
    const a = app(requireAllowedHost(new HostAllowList([])));
    const long = `${'h'.repeat(150)}.example`;
    const [, body] = await answer(await a.request('/things', { headers: { host: long } }));
    expect((body as { message: string }).message).toBe(
      `Host "${'h'.repeat(100)}" is not an address of this API; without --api-token-file it answers only to its own address and localhost (add names with --allowed-host)`,
    );
  });
});

describe('requireSameOrigin', () => {
  const a = app(requireSameOrigin());
  const post = (origin: string | undefined, host = 'api.local:3000', method = 'POST'): Promise<Response> =>
    Promise.resolve(a.request(`http://${host}/things`, { method, headers: { host, ...(origin === undefined ? {} : { origin }) } }));

  test('a mutating request from another origin is 403 naming its method and Origin', async () => {
    expect(await answer(await post('http://evil.example'))).toEqual([
      403,
      { error: 'ERR_CROSS_ORIGIN', message: 'cross-origin POST refused: Origin "http://evil.example" is not this API' },
    ]);
    expect((await post('http://evil.example', 'api.local:3000', 'DELETE')).status).toBe(403);
  });

  test('its own origin (http or https, any case of Host), no Origin, and reads pass', async () => {
    expect((await post('http://api.local:3000')).status).toBe(200);
    expect((await post('https://api.local:3000')).status).toBe(200);
    expect((await post('http://api.local:3000', 'API.local:3000')).status).toBe(200);
    expect((await post(undefined)).status).toBe(200);
    expect((await post('http://evil.example', 'api.local:3000', 'GET')).status).toBe(200);
    expect((await post('http://evil.example', 'api.local:3000', 'HEAD')).status).toBe(200);
  });

  test('an Origin that is not an http(s) URL is refused, and a long one is cut in the message', async () => {
    expect((await post('null')).status).toBe(403);
    expect((await post('ftp://api.local:3000')).status).toBe(403);
    const long = `http://${'o'.repeat(200)}.example`;
    const [, body] = await answer(await post(long));
    expect((body as { message: string }).message).toBe(`cross-origin POST refused: Origin "${long.slice(0, 100)}" is not this API`);
  });
});

describe('requireMutationMediaType', () => {
  const a = app(requireMutationMediaType());
  // Bytes, not a string: a string body would make the Request add text/plain itself.
  const send = (method: string, headers: Record<string, string>, body?: string): Promise<Response> =>
    Promise.resolve(a.request('/things', { method, headers, ...(body === undefined ? {} : { body: new TextEncoder().encode(body) }) }));

  test('JSON and the YAML types pass, parameters and case aside', async () => {
    expect(MUTATION_MEDIA_TYPES).toEqual(['application/json', 'application/yaml', 'application/x-yaml', 'text/yaml']);
    for (const type of ['application/json', 'Application/JSON; charset=utf-8', 'application/yaml', 'application/x-yaml', ' text/yaml ;x=1'])
      expect((await send('POST', { 'content-type': type }, '{}')).status).toBe(200);
  });

  test('a form or text/plain is 415 naming the type, the method and what to send', async () => {
    expect(await answer(await send('PUT', { 'content-type': 'text/plain' }, 'x'))).toEqual([
      415,
      {
        error: 'ERR_UNSUPPORTED_MEDIA_TYPE',
        message: 'Content-Type "text/plain" is not accepted for PUT: send application/json, application/yaml, application/x-yaml, text/yaml',
      },
    ]);
    expect((await send('POST', { 'content-type': 'application/x-www-form-urlencoded' }, 'a=1')).status).toBe(415);
  });

  test('a bodyless request without a type passes; a body without a type does not', async () => {
    expect((await send('POST', {})).status).toBe(200);
    expect((await send('POST', { 'content-length': '0' })).status).toBe(200);
    const res = await send('POST', { 'content-length': '3' }, 'abc');
    expect(await answer(res)).toEqual([
      415,
      {
        error: 'ERR_UNSUPPORTED_MEDIA_TYPE',
        message: 'Content-Type "" is not accepted for POST: send application/json, application/yaml, application/x-yaml, text/yaml',
      },
    ]);
    expect((await send('POST', { 'transfer-encoding': 'chunked' })).status).toBe(415);
  });

  test('reads pass whatever their type', async () => {
    expect((await send('GET', { 'content-type': 'text/plain' })).status).toBe(200);
    expect((await send('HEAD', { 'content-type': 'text/plain' })).status).toBe(200);
  });

  test('a long type is cut to 100 characters in the message', async () => {
    const type = `text/${'p'.repeat(200)}`;
    const [, body] = await answer(await send('POST', { 'content-type': type }, 'x'));
    expect((body as { message: string }).message).toContain(`Content-Type "${type.slice(0, 100)}" is not accepted`);
  });
});
