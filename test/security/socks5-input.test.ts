/**
 * What a hostile SOCKS5 client can send to a proxy's port (issue 24 opened it): a command other than
 * CONNECT, an address type that does not exist, a handshake that stops half-way or never starts
 * after its first byte. Each gets its RFC 1928 refusal or is closed, reaches no `admit` and no
 * destination, and the proxy goes on answering on the same port.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { listenForwardProxy, type ForwardProxy } from '../../src/forward-proxy/server.ts';
import type { Destination } from '../../src/forward-proxy/types.ts';

const USER = Buffer.from('crawler');
const PASS = Buffer.from('secret-pw');

/** The greeting and the RFC 1929 login every case starts with, then `request`. */
function loggedIn(request: number[]): Buffer {
  return Buffer.concat([Buffer.from([5, 1, 2]), Buffer.from([1, USER.length]), USER, Buffer.from([PASS.length]), PASS, Buffer.from(request)]);
}

/** Everything the proxy sends until it closes the connection. */
async function exchange(port: number, bytes: Buffer): Promise<number[]> {
  const socket: Socket = connect({ host: '127.0.0.1', port });
  await once(socket, 'connect');
  const received: number[] = [];
  socket.on('data', (chunk: Buffer) => received.push(...chunk));
  socket.on('error', () => undefined);
  socket.write(bytes);
  await once(socket, 'close');
  return received;
}

describe('hostile SOCKS5 input on a proxy port', () => {
  let proxy: ForwardProxy;
  const admitted: Destination[] = [];

  beforeAll(async () => {
    proxy = await listenForwardProxy({
      host: '127.0.0.1',
      port: 0,
      socks5: { authenticate: (u, p) => u === 'crawler' && p === 'secret-pw' },
      admit: (_credentials, destination) => {
        admitted.push(destination);
        return Promise.resolve({ allowed: false, status: 403, message: 'Forbidden by egress policy: test\n' });
      },
      generation: () => 1,
      maxConnections: 64,
      // A handshake silent this long is closed.
      headersTimeoutMs: 300,
      keepAliveTimeoutMs: 5_000,
    });
  });
  afterAll(async () => {
    await proxy?.close();
  });

  test.each([
    ['BIND', [5, 2, 0, 1, 127, 0, 0, 1, 0, 80], 7],
    ['UDP ASSOCIATE', [5, 3, 0, 1, 127, 0, 0, 1, 0, 80], 7],
    ['an address type that does not exist', [5, 1, 0, 9, 127, 0, 0, 1, 0, 80], 8],
    ['a request of another version', [4, 1, 0, 1, 127, 0, 0, 1, 0, 80], 8],
  ])('%s is refused with its RFC 1928 reply and never reaches admit', async (_what, request, code) => {
    const before = admitted.length;
    const answer = await exchange(proxy.port, loggedIn(request));
    // The method choice, the login's success, then the refusal (all-zero bound address).
    expect(answer).toEqual([5, 2, 1, 0, 5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
    expect(admitted.length).toBe(before);
  });

  test('a handshake that stops half-way, or after its first byte, is closed by the silence bound', async () => {
    expect(await exchange(proxy.port, Buffer.from([5]))).toEqual([]);
    // Greeting and the start of a login, then nothing.
    expect(await exchange(proxy.port, Buffer.from([5, 1, 2, 1, 7, 99]))).toEqual([5, 2]);
    // A method count promising more methods than are sent.
    expect(await exchange(proxy.port, Buffer.from([5, 255, 2]))).toEqual([]);
  });

  test('the longest name a request can carry goes to admit as it is, and is refused there', async () => {
    const name = Buffer.alloc(255, 0x61);
    const answer = await exchange(proxy.port, loggedIn([5, 1, 0, 3, 255, ...name, 0, 80]));
    expect(answer.slice(0, 6)).toEqual([5, 2, 1, 0, 5, 2]);
    expect(admitted.at(-1)).toEqual({ hostname: 'a'.repeat(255), port: 80 });
  });

  test('after all of it the port still answers HTTP', async () => {
    const answer = await exchange(proxy.port, Buffer.from('GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\n\r\n'));
    expect(Buffer.from(answer).toString('latin1')).toMatch(/^HTTP\/1\.1 403 /);
  });
});
