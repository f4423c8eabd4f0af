import type { BasicCredentials } from '../../forward-proxy/basic-credentials.ts';
import type { Destination, OwnAnswer, Refusal } from '../../forward-proxy/types.ts';
import type { TrafficStats } from './traffic-stats.ts';

/**
 * A proxy's own traffic report (docs/usage.md#traffic): the proxy program answers one reserved
 * plain-HTTP request itself, `GET http://egress-proxy.invalid/traffic` with its own valid
 * Proxy-Authorization, with its counts since it started (`{pid, startedAt, domains}`, the format
 * of `traffic-stats.json`). That is how the worker reads the counts of proxies it has no files of
 * (VMs and containers: src/proxies/remote-traffic.ts). `.invalid` can never be a real destination
 * (RFC 2606), so nothing a client could reach is shadowed: any request to that host is answered by
 * the proxy (never forwarded nor resolved), 407 without valid credentials, 404 for anything but
 * the report. Bundled into the proxy programs: nothing but types of ours.
 */
export const TRAFFIC_REPORT_HOST = 'egress-proxy.invalid';
export const TRAFFIC_REPORT_PATH = '/traffic';
export const TRAFFIC_REPORT_URL = `http://${TRAFFIC_REPORT_HOST}${TRAFFIC_REPORT_PATH}`;

/** The `answerOwn` of a proxy that reports `report()` (src/forward-proxy/types.ts), refusing bad credentials with `authRequired`. */
export function trafficReportAnswer(
  check: (username: string, password: string) => boolean,
  report: () => TrafficStats,
  authRequired: Refusal,
): (credentials: BasicCredentials | undefined, destination: Destination) => OwnAnswer | undefined {
  return (credentials, destination) => {
    if (destination.hostname !== TRAFFIC_REPORT_HOST) return undefined;
    if (!check(credentials?.username ?? '', credentials?.password ?? '')) {
      return { status: authRequired.status, body: authRequired.message, ...(authRequired.headers ? { headers: authRequired.headers } : {}) };
    }
    const request = destination.request;
    if (request?.method !== 'GET' || request.path !== TRAFFIC_REPORT_PATH) {
      return { status: 404, body: `this proxy answers only GET ${TRAFFIC_REPORT_URL} itself\n` };
    }
    return { status: 200, body: JSON.stringify(report()), headers: { 'content-type': 'application/json', 'cache-control': 'no-store' } };
  };
}
