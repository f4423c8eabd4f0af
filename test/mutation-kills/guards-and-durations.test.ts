/**
 * Found unchecked by the mutation run: a GET carrying a body on a real listener (the body limit leaves
 * reads alone), Host edge cases (an IPv6 --allowed-host without a port, a request without Host), a
 * bracketed literal missing its closing bracket, and the KVM check's duration in seconds. See
 * docs/testing.md#mutation-testing.
 */
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { parseAddress } from '../../src/egress/addresses.ts';
import type { KvmHostPool } from '../../src/kvm/pool/index.ts';
import { HostAllowList, limitBody, requireAllowedHost } from '../../src/http/request-guards.ts';
import { checkKvmHost } from '../../src/providers/kvm/check.ts';
import { kvmHostSchema } from '../../src/providers/kvm/config.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the body limit on a real listener', () => {
  test('a GET carrying a body over the limit is answered by its route; a POST is 413', async () => {
    const app = new Hono();
    app.use('*', limitBody(1024));
    app.all('/r', (c) => c.text(`${c.req.method} ok`));
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => server.once('listening', resolve));
    const { port } = server.address() as AddressInfo;
    const send = (method: string): Promise<[number | undefined, string]> =>
      new Promise((resolve, reject) => {
        const body = Buffer.alloc(4096, 120);
        const req = request({ host: '127.0.0.1', port, path: '/r', method, headers: { 'content-length': body.length, connection: 'close' } }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve([res.statusCode, text]));
        });
        req.on('error', reject);
        req.end(body);
      });
    try {
      expect(await send('GET')).toEqual([200, 'GET ok']);
      expect((await send('POST'))[0]).toBe(413);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('Host edges', () => {
  test('an IPv6 --allowed-host without a port allows every port', () => {
    const hosts = new HostAllowList(['[::1]']);
    expect(hosts.allows('[::1]:8080')).toBe(true);
    expect(hosts.allows('[::1]')).toBe(true);
  });

  test('a request without Host is refused, whatever names are allowed', async () => {
    expect(new HostAllowList(['undefined']).allows(undefined)).toBe(false);
    const app = new Hono();
    app.use('*', requireAllowedHost(new HostAllowList([])));
    app.get('/r', (c) => c.text('ok'));
    const res = await app.request('/r');
    expect(res.status).toBe(403);
    expect(((await res.json()) as { message: string }).message).toMatch(/^Host "" is not an address of this API/);
  });

  test('a bracketed literal must close its bracket', () => {
    expect(parseAddress('[::1')).toBeUndefined();
    expect(parseAddress('::1]')).toBeUndefined();
  });
});

describe('the KVM check duration', () => {
  test('is in seconds, from the check’s start to its verdict', async () => {
    const clock = [1000, 3500];
    vi.spyOn(performance, 'now').mockImplementation(() => clock.shift() ?? 3500);
    const host = kvmHostSchema.parse({ name: 'h', address: '10.0.0.5', privateKeyFile: '/k', knownHostsFile: '/kh' });
    const pool = { probe: () => Promise.reject(new Error('down')) } as unknown as KvmHostPool;
    const r = await checkKvmHost(pool, host, new AbortController().signal);
    expect(r.durationSeconds).toBe(2.5);
  });
});
