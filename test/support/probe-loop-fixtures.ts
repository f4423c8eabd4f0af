/** What the probe-loop suites share: the echo endpoint, a lifecycle around the test's forward proxy, waiting for a probe, claims without Redis. */
import type { Server as HttpServer } from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Instance, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { echoRoute } from '../../src/readiness/echo.ts';
import type { ProbeEvent, ProbeLoop } from '../../src/readiness/probe-loop.ts';
import type { RedisClient } from '../../src/redis/connections.ts';

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

/**
 * The probe loop's per-proxy claims held in this process, for suites that run with no Redis: the one
 * call the loop makes of its `redis` (a pipeline of `SET key worker PX ms NX`, then `exec`), answered
 * as Redis would — `OK` for a key nobody holds (or whose claim has expired), null otherwise. One loop
 * per fake: claims across workers are the Redis suite's (test/readiness/probe-claims.test.ts).
 */
export function memoryProbeClaims(now: () => number = Date.now): RedisClient {
  const expiresAt = new Map<string, number>();
  const pipeline = () => {
    const queued: { key: string; ms: number }[] = [];
    const commands = {
      set(key: string, _value: string, px: 'PX', ms: number, nx: 'NX') {
        if (px !== 'PX' || nx !== 'NX') throw new Error(`memoryProbeClaims: only SET … PX ms NX, not ${px} … ${nx}`);
        queued.push({ key, ms });
        return commands;
      },
      // Applied at exec, in order, as Redis runs a pipeline.
      exec: async (): Promise<[null, 'OK' | null][]> =>
        queued.map(({ key, ms }) => {
          if ((expiresAt.get(key) ?? 0) > now()) return [null, null];
          expiresAt.set(key, now() + ms);
          return [null, 'OK'];
        }),
    };
    return commands;
  };
  return { pipeline } as unknown as RedisClient;
}
