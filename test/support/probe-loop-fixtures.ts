/** What the probe-loop suites share: the echo endpoint, a lifecycle around the test's forward proxy, waiting for a probe, claims without Redis. */
import type { Server as HttpServer } from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Instance, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { echoRoute } from '../../src/readiness/echo.ts';
import type { ProbeEvent, ProbeLoop } from '../../src/readiness/probe-loop.ts';

/** The real echo endpoint the readiness probe asks through the proxy, on 127.0.0.1. */
export function startEcho(): Promise<{ server: HttpServer; url: string }> {
  const app = new Hono();
  app.route('/v1', echoRoute());
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info) =>
      resolve({ server, url: `http://127.0.0.1:${info.port}/v1/echo` }),
    ) as HttpServer;
  });
}

/** A lifecycle whose one instance is the test's forward proxy (the provider part is not under test here). */
export function lifecycleFor(proxy: { port: number }, id = 'proc-1'): ProxyLifecycle {
  const instance = (name: string): Instance => ({
    name,
    id,
    state: 'running',
    owner: { fleet: 'test', proxy: 'p' },
    createdAt: new Date().toISOString(),
    endpoint: { host: '127.0.0.1', port: proxy.port },
  });
  return {
    ensureInstance: async (spec) => instance(spec.name),
    getInstance: async (name) => instance(name),
    deleteInstance: async () => undefined,
    async *listInstances() {},
  };
}

/** Waits for the first `probed` event that `accept` takes. */
export function nextProbe(loop: ProbeLoop, accept: (e: ProbeEvent) => boolean): Promise<ProbeEvent> {
  return new Promise((resolve) => {
    const on = (e: ProbeEvent): void => {
      if (!accept(e)) return;
      loop.off('probed', on);
      resolve(e);
    };
    loop.on('probed', on);
  });
}
