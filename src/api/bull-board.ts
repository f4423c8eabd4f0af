import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Queue } from 'bullmq';
import type { Hono } from 'hono';

export const BULL_BOARD_PATH = '/admin/queues';

/** Mounts Bull Board at /admin/queues (behind the API's token check, like every route). */
export function mountBullBoard(app: Hono, queues: readonly Queue[]): void {
  const adapter = new HonoAdapter(serveStatic);
  adapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { allowRetries: true })),
    serverAdapter: adapter,
    options: { uiConfig: { boardTitle: 'egress-proxies', miscLinks: [{ text: 'Metrics', url: '/metrics' }] } },
  });
  app.route(BULL_BOARD_PATH, adapter.registerPlugin());
}
