/**
 * The traffic collector over a real local proxy: what the proxy counted reaches the sink as hourly
 * records per proxy and domain; a failing sink loses nothing and, once it works, counts nothing twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';
import { createLocalLifecycle, type LocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { startTrafficCollector, TrafficSinkError, type TrafficCollector } from '../../src/usage/traffic-collector.ts';
import { trafficSources } from '../../src/providers/traffic-sources.ts';
import type { TrafficRecord } from '../../src/usage/usage-types.ts';
import { stopProxyHosts } from '../support/local-host.ts';
import { getThroughProxy } from '../support/proxy-get.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { countingOrigin, type CountingOrigin } from '../support/traffic-clients.ts';
import { waitFor } from '../support/wait.ts';

const CREDS: ProxyCredentials = { username: 'crawler', password: 'collector-pass' };
const signal = (): AbortSignal => AbortSignal.timeout(30_000);
const NOW = new Date('2026-12-07T13:42:10.000Z');

let origin: CountingOrigin;
let dataDir: string;
let lifecycle: LocalLifecycle;
let port: number;

beforeAll(async () => {
  origin = await countingOrigin('127.0.0.1', 500);
  dataDir = await tempDir('egress-collector-');
  lifecycle = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy: proxyEgressPolicy({ allow: ['127.0.0.0/8'], deny: [] }, undefined) });
  port = (await lifecycle.ensureInstance({ name: 'ep-c1', owner: { fleet: 'collector', proxy: 'c1' }, credentials: CREDS }, signal())).endpoint!.port;
});

afterAll(async () => {
  lifecycle.close();
  await stopProxyHosts(dataDir);
  await origin.close();
});

const requests = (records: readonly TrafficRecord[]): number => records.reduce((n, r) => n + r.counts.requests, 0);

describe('the traffic collector', () => {
  it('hands the sink hourly records per proxy and domain, keeps them while the sink fails, and never sends them twice', async () => {
    const calls: TrafficRecord[][] = [];
    const kept: TrafficRecord[] = [];
    let failing = true;
    const collector: TrafficCollector = startTrafficCollector({
      sources: trafficSources([{ type: 'local', name: 'local-a', dataDir }], '/unused'),
      sink: (records) => {
        calls.push(records);
        if (failing) return Promise.reject(new Error('usage store unreachable'));
        kept.push(...records);
        return Promise.resolve();
      },
      resolve: (instance) => Promise.resolve(instance === 'ep-c1' ? { proxy: 'c1', pool: 'green' } : undefined),
      logger: silentLogger(),
      intervalMs: 3_600_000,
      now: () => NOW,
    });
    const url = `http://127.0.0.1:${origin.port}/`;
    const [up0, down0] = [origin.received(), origin.sent()];
    for (let i = 0; i < 2; i++) expect((await getThroughProxy({ port, ...CREDS }, url)).status).toBe(200);
    // The proxy writes its counts shortly after; a flush sends them once they are there.
    await waitFor('two requests collected', async () => {
      await collector.flush(signal()).catch((err: unknown) => {
        if (!(err instanceof TrafficSinkError)) throw err;
      });
      return requests(calls.at(-1) ?? []) === 2;
    });
    expect(collector.pending).toBe(1);

    failing = false;
    expect((await getThroughProxy({ port, ...CREDS }, url)).status).toBe(200);
    await waitFor('the third request in the records', async () => {
      await collector.flush(signal());
      return requests(kept) === 3;
    });
    const delivered = kept;
    expect(collector.pending).toBe(0);
    expect(requests(delivered)).toBe(3);
    for (const record of delivered) {
      expect(record).toMatchObject({ hour: '2026-12-07T13:00:00.000Z', proxy: 'c1', pool: 'green', provider: 'local-a', domain: '127.0.0.1' });
      expect(record.counts.tunnels).toBe(0);
    }
    // Exactly what the origin's connections carried, once.
    expect(delivered.reduce((n, r) => n + r.counts.bytesUp, 0)).toBe(origin.received() - up0);
    expect(delivered.reduce((n, r) => n + r.counts.bytesDown, 0)).toBe(origin.sent() - down0);

    // Nothing new: nothing is sent again, and close makes its last flush.
    const before = calls.length;
    await collector.close(signal());
    expect(calls.length).toBe(before);
  });

  it('a restarted worker starts from what the store already took: only the traffic after it is sent', async () => {
    const kept: TrafficRecord[] = [];
    const collector = startTrafficCollector({
      sources: trafficSources([{ type: 'local', name: 'local-a', dataDir }], '/unused'),
      sink: (records) => {
        kept.push(...records);
        return Promise.resolve();
      },
      logger: silentLogger(),
      intervalMs: 3_600_000,
      now: () => NOW,
    });
    // The first case's collector took three requests and recorded so beside the proxy's counts.
    await collector.flush(signal());
    expect(requests(kept)).toBe(0);
    expect((await getThroughProxy({ port, ...CREDS }, `http://127.0.0.1:${origin.port}/`)).status).toBe(200);
    await waitFor('the new request collected', async () => {
      await collector.flush(signal());
      return requests(kept) === 1;
    });
    await collector.close(signal());
    expect(requests(kept)).toBe(1);
  });
});
