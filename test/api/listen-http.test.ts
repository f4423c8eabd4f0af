import { Hono } from 'hono';
import { describe, expect, test } from 'vitest';
import { listenHttp } from '../../src/http/listen.ts';
import { captureLogger } from '../fakes/libvirt/harness.ts';

describe('an HTTP listener (the API’s and the metrics port’s)', () => {
  test('an error of the listening socket after it listens is logged, and it goes on answering', async () => {
    const app = new Hono();
    app.get('/healthz', (c) => c.text('ok'));
    const { logger, lines } = captureLogger();
    const server = await listenHttp(app.fetch, { hostname: '127.0.0.1', port: 0, portFlag: '--port', logger, name: 'api' });
    try {
      const { port } = server.address() as { port: number };
      // What libuv reports for an accept that failed (here out of memory for socket buffers).
      server.emit('error', Object.assign(new Error('accept ENOBUFS'), { code: 'ENOBUFS', syscall: 'accept' }));
      const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5000) });
      expect(await res.text()).toBe('ok');
      expect(lines).toContainEqual(expect.objectContaining({ level: 50, listener: 'api', code: 'ENOBUFS', msg: 'api listener error; still listening' }));
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('a taken port is a ConfigError naming the flag given', async () => {
    const { logger } = captureLogger();
    const first = await listenHttp(new Hono().fetch, { hostname: '127.0.0.1', port: 0, portFlag: '--metrics-port', logger, name: 'metrics' });
    try {
      const { port } = first.address() as { port: number };
      await expect(listenHttp(new Hono().fetch, { hostname: '127.0.0.1', port, portFlag: '--metrics-port', logger, name: 'metrics' })).rejects.toMatchObject({
        code: 'ERR_CONFIG',
        message: expect.stringContaining(`127.0.0.1:${port} is already in use (EADDRINUSE): another process listens there; choose another --metrics-port`),
      });
    } finally {
      await new Promise((resolve) => first.close(resolve));
    }
  });
});
