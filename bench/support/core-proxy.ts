/**
 * The forward-proxy core alone in a process of its own, for the data-plane bench's accounting rows:
 * `node --import tsx bench/support/core-proxy.ts <statsDir> on|off` listens on 127.0.0.1 (a
 * kernel-chosen port, printed as one line), admits everything, and with `on` counts its traffic
 * with the proxy host's recorder (traffic-stats.ts, its file in `statsDir`). No host, no relays, no
 * policy: the difference between `on` and `off` is the accounting alone.
 */
import { listenForwardProxy } from '../../src/forward-proxy/server.ts';
import { silentLogger } from '../../src/logging.ts';
import { createTrafficRecorder } from '../../src/providers/local/traffic-stats.ts';

const [, , statsDir = '.', which = 'on'] = process.argv;
const traffic = which === 'on' ? createTrafficRecorder(statsDir, { pid: process.pid, startedAt: new Date().toISOString() }, silentLogger()) : undefined;
const proxy = await listenForwardProxy({
  host: '127.0.0.1',
  port: 0,
  admit: () => Promise.resolve({ allowed: true }),
  generation: () => 0,
  maxConnections: 1024,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  ...(traffic ? { onTraffic: (hostname, kind, up, down) => traffic.record(hostname, kind, up, down) } : {}),
});
process.stdout.write(`${proxy.port}\n`);
process.on('SIGTERM', () => void proxy.close().then(() => process.exit(0)));
