import { Queue } from 'bullmq';
import { inject } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { ALL_QUEUES } from '../../queues/names.ts';
import { createApiApp } from '../../src/api/app.ts';
import { HostAllowList } from '../../src/http/request-guards.ts';
import { silentLogger } from '../../src/logging.ts';
import { uniquePrefix } from './config.ts';

/** The API's route table (Bull Board's included), for tests that hit every route: the fuzz, the Redis stall. */

export interface Route {
  method: string;
  path: string;
}

/** Every concrete route of the API (not middleware), read from hono's route table. */
export async function routeTable(): Promise<Route[]> {
  const queues = ALL_QUEUES.map((name) => new Queue(name, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: uniquePrefix() }));
  try {
    const never = (): never => {
      throw new Error('not called: only the route table is read');
    };
    const app = createApiApp({
      store: { listProviderHealth: never, getProviderHealth: never } as never,
      proxies: never as never,
      pools: never as never,
      replacements: never as never,
      providers: ['local'],
      checks: queues[0] as Queue,
      checkEvents: never as never,
      queues,
      inspector: never as never,
      registry: never as never,
      tokens: [],
      events: never as never,
      usage: never as never,
      maxBodyBytes: 1024,
      hosts: new HostAllowList([]),
      ping: never,
      storeConnected: () => true,
      checkWaitMs: 1,
      picks: { picker: never as never, feedback: never as never, rateLimit: never as never },
      logger: silentLogger(),
    });
    const seen = new Set<string>();
    return app.routes
      .filter((r) => r.method !== 'ALL')
      .map((r) => ({ method: r.method, path: r.path }))
      .filter((r) => !seen.has(`${r.method} ${r.path}`) && seen.add(`${r.method} ${r.path}`));
  } finally {
    await Promise.all(queues.map((q) => q.close()));
  }
}
