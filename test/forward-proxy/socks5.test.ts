/**
 * SOCKS5 on the forward proxy's own port (issue 24): username/password with the proxy's own
 * credentials, CONNECT only, every destination through the same `admit` as an HTTP CONNECT. Driven
 * by curl (an independent SOCKS5 client) and by our own client (chain-connect.ts) for the replies
 * curl does not show; HTTP keeps working on the same port.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { connectThroughHop } from '../../src/forward-proxy/chain-connect.ts';
import { listenForwardProxy, type ForwardProxy } from '../../src/forward-proxy/server.ts';
import type { Destination } from '../../src/forward-proxy/types.ts';

const run = promisify(execFile);

describe('SOCKS5 on the proxy port', () => {
  let origin: Server;
  let originPort = 0;
  let proxy: ForwardProxy;
  const admitted: Destination[] = [];

  beforeAll(async () => {
    origin = createServer((req, res) => res.end(`origin: ${req.url}`));
    origin.listen(0, '127.0.0.1');
    await once(origin, 'listening');
    originPort = (origin.address() as AddressInfo).port;
    const ours = (u: string | undefined, p: string | undefined): boolean => u === 'crawler' && p === 'secret-pw';
    proxy = await listenForwardProxy({
      host: '127.0.0.1',
      port: 0,
      socks5: { authenticate: ours },
      admit: (credentials, destination) => {
        if (!ours(credentials?.username, credentials?.password)) return Promise.resolve({ allowed: false, status: 407, message: 'no' });
        // The stand-in policy: only the loopback origin's port.
        if (destination.port !== originPort) return Promise.resolve({ allowed: false, status: 403, message: 'Forbidden by egress policy: test\n' });
        admitted.push(destination);
        return Promise.resolve({ allowed: true });
      },
      generation: () => 1,
      maxConnections: 64,
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 5_000,
    });
  });
  afterAll(async () => {
    await proxy?.close();
    origin?.closeAllConnections();
    await new Promise((resolve) => origin?.close(resolve));
  });

  test("curl fetches through it with the proxy's credentials, by address and by name", async () => {
    for (const scheme of ['socks5', 'socks5h']) {
      const host = scheme === 'socks5h' ? 'localhost' : '127.0.0.1';
      const { stdout } = await run('curl', [
        '-sS',
        '--max-time',
        '10',
        '-x',
        `${scheme}://crawler:secret-pw@127.0.0.1:${proxy.port}`,
        `http://${host}:${originPort}/via-${scheme}`,
      ]);
      expect(stdout).toBe(`origin: /via-${scheme}`);
    }
    expect(admitted.map((d) => d.hostname)).toEqual(['127.0.0.1', 'localhost']);
  });

  test('wrong credentials fail the authentication; a destination the policy refuses is "not allowed"', async () => {
    const hop = (password: string) => ({ scheme: 'socks5' as const, host: '127.0.0.1', port: proxy.port, username: 'crawler', password });
    await expect(connectThroughHop(hop('wrong'), '127.0.0.1', originPort, { timeoutMs: 5000 })).rejects.toMatchObject({ code: 'EPROXYAUTH' });
    await expect(connectThroughHop(hop('secret-pw'), '127.0.0.1', 9, { timeoutMs: 5000 })).rejects.toMatchObject({ code: 'EPROXYREFUSED' });
    const curl = await run('curl', [
      '-sS',
      '--max-time',
      '10',
      '-x',
      `socks5://crawler:wrong@127.0.0.1:${proxy.port}`,
      `http://127.0.0.1:${originPort}/`,
    ]).catch((err: unknown) => err as { code: number });
    expect((curl as { code?: number }).code).not.toBe(0);
  });

  test('a client offering no username/password method is refused (0xff), and HTTP goes on on the same port', async () => {
    const socket = connect({ host: '127.0.0.1', port: proxy.port });
    await once(socket, 'connect');
    socket.write(Buffer.from([5, 1, 0]));
    const [answer] = (await once(socket, 'data')) as [Buffer];
    expect([...answer]).toEqual([5, 0xff]);
    socket.destroy();
    const auth = Buffer.from('crawler:secret-pw').toString('base64');
    const { stdout } = await run('curl', [
      '-sS',
      '--max-time',
      '10',
      '-x',
      `http://127.0.0.1:${proxy.port}`,
      '-H',
      `Proxy-Authorization: Basic ${auth}`,
      `http://127.0.0.1:${originPort}/http`,
    ]);
    expect(stdout).toBe('origin: /http');
  });
});
