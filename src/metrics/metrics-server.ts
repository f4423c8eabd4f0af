import type { AddressInfo } from 'node:net';
import { Hono } from 'hono';
import type { Registry } from 'prom-client';
import { requireToken } from '../http/auth.ts';
import { HostAllowList, limitBody, requireAllowedHost } from '../http/request-guards.ts';
import type { Logger } from '../logging.ts';
import { listenHttp } from '../http/listen.ts';
import { effectiveLimits } from '../http/connection-limits.ts';
import { connectionRefusals } from '../http/connection-metrics.ts';

export interface MetricsServer {
  readonly url: string;
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  /** `--api-token-file`'s tokens: `/metrics` then needs one, as on the API. */
  tokens: readonly string[];
  /** `--allowed-host` names, served (besides the bound address and localhost) while there are no tokens. */
  allowedHosts: readonly string[];
  /** Where errors of the listening socket are logged. */
  logger: Logger;
  /** The process's soft limit on open files: the listener holds at most an eighth of it in connections. */
  openFiles?: number | undefined;
}

/** Scrapers are few: a small cap, an eighth of the open-files limit at most. */
const METRICS_LIMITS = { maxConnections: 64, perPeer: 16 };

/**
 * `/metrics` and `/healthz` for a role without the API (a worker's job histograms, the KVM
 * pool's dials), so each process can be scraped on its own port. It is defended like the API:
 * tokens when given (required off loopback, checked in the CLI), otherwise only its own address
 * and localhost as `Host`; `/healthz` stays open.
 */
export async function startMetricsServer(registry: Registry, host: string, port: number, options: MetricsServerOptions): Promise<MetricsServer> {
  const hosts = new HostAllowList(options.allowedHosts);
  const app = new Hono();
  app.onError((err, c) => c.json({ error: 'Internal', message: `metrics failed: ${err.message}` }, 500));
  app.notFound((c) => c.json({ error: 'ERR_NOT_FOUND', message: 'not found: this listener serves /metrics and /healthz' }, 404));
  if (options.tokens.length === 0) app.use('*', requireAllowedHost(hosts));
  app.use('*', requireToken(options.tokens));
  app.use('*', limitBody(1024));
  app.get('/healthz', (c) => c.text('ok'));
  app.get('/metrics', async (c) => c.body(await registry.metrics(), 200, { 'Content-Type': registry.contentType }));

  const refusals = connectionRefusals(registry);
  const server = await listenHttp(app.fetch, {
    hostname: host,
    port,
    portFlag: '--metrics-port',
    logger: options.logger,
    name: 'metrics',
    limits: effectiveLimits(METRICS_LIMITS, options.openFiles, 1 / 8),
    reservedPaths: ['/healthz'],
    onRefused: (reason) => refusals.inc({ listener: 'metrics', reason }),
  });
  const address = server.address() as AddressInfo;
  hosts.bind(address.address, address.port);
  return {
    url: `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        if ('closeAllConnections' in server) server.closeAllConnections();
      }),
  };
}
