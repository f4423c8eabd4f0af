import { request, type IncomingMessage } from 'node:http';
import { EgressError } from '../errors.ts';
import type { ProxyCredentials } from '../model/proxy-credentials.ts';
import { TRAFFIC_REPORT_HOST, TRAFFIC_REPORT_URL } from '../providers/local/traffic-report.ts';
import { asTrafficStats, type TrafficStats } from '../providers/local/traffic-stats.ts';

/**
 * The worker's side of a proxy's traffic report (src/providers/local/traffic-report.ts): one
 * `GET http://egress-proxy.invalid/traffic` sent to the proxy itself with its credentials, on a
 * connection of its own, answered with the proxy's counts since it started.
 */

/** The most a report may be (10 000 domains of about 100 bytes each, and room). */
export const MAX_REPORT_BYTES = 4 * 1024 * 1024;

/** A proxy did not answer its traffic report (down, an image without one, a wrong answer); retryable: the next collection asks again. */
export class TrafficReportError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_TRAFFIC_REPORT', message, { ...options, retryable: true });
  }
}

/** The counts of the proxy at `proxyUrl` (`http://host:port`); rejects with TrafficReportError, or the signal's reason. */
export async function fetchTrafficReport(proxyUrl: string, credentials: ProxyCredentials, signal: AbortSignal): Promise<TrafficStats> {
  const url = new URL(proxyUrl);
  if (url.protocol !== 'http:') throw new TrafficReportError(`proxy URL ${url.protocol}// is not an http:// proxy`);
  const auth = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
  const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port === '' ? 80 : Number(url.port),
        method: 'GET',
        path: TRAFFIC_REPORT_URL,
        agent: false,
        signal,
        headers: { host: TRAFFIC_REPORT_HOST, 'proxy-authorization': `Basic ${auth}`, accept: 'application/json', connection: 'close' },
      },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_REPORT_BYTES) res.destroy(new TrafficReportError(`traffic report longer than ${MAX_REPORT_BYTES} bytes`));
          else chunks.push(chunk);
        });
        res.once('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.once('error', reject);
      },
    );
    req.once('error', reject);
    req.end();
  }).catch((err: unknown) => {
    signal.throwIfAborted();
    throw err instanceof TrafficReportError ? err : new TrafficReportError(`no traffic report: ${(err as Error).message}`, { cause: err });
  });
  if (status !== 200) throw new TrafficReportError(`the proxy answered its traffic report with HTTP ${status}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (err) {
    throw new TrafficReportError('the traffic report is not JSON', { cause: err });
  }
  const stats = asTrafficStats(parsed);
  if (!stats) throw new TrafficReportError('the traffic report is not {pid, startedAt, domains}');
  return stats;
}
