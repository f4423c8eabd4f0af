import { readFile } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfigDocument } from '../../src/config/file.ts';
import { egressGuards, proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { silentLogger } from '../../src/logging.ts';
import type { Instance, InstanceSpec } from '../../src/providers/lifecycle.ts';
import { localProviderSchema } from '../../src/providers/local/index.ts';
import { createLocalLifecycle, type LocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { findHostProcesses } from '../../src/providers/local/process-table.ts';
import { inSourceAddresses, sourceAddressCandidates } from '../../src/providers/local/source-addresses.ts';
import { echoRoute } from '../../src/readiness/echo.ts';
import { probeProxy } from '../../src/readiness/probe.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const CREDS = { username: 'crawler', password: 'src-addr-secret' };
const signal = (): AbortSignal => AbortSignal.timeout(30_000);

function spec(name: string): InstanceSpec {
  return { name, owner: { fleet: 'fleet-s', proxy: `proxy-${name}` }, credentials: CREDS };
}

function first<T>(items: Iterable<T>, n: number): T[] {
  const out: T[] = [];
  for (const item of items) {
    if (out.length === n) break;
    out.push(item);
  }
  return out;
}

describe('sourceAddresses: the configuration', () => {
  it('spells out addresses and blocks in order, without network and broadcast addresses, lazily for an IPv6 /64', () => {
    expect([...sourceAddressCandidates(['127.0.0.2/31', '127.0.0.4', '10.0.0.0/30', '127.0.0.4'])]).toEqual([
      '127.0.0.2',
      '127.0.0.3',
      '127.0.0.4',
      '10.0.0.1',
      '10.0.0.2',
    ]);
    expect(first(sourceAddressCandidates(['2001:db8:1:2::/64']), 3)).toEqual(['2001:db8:1:2::1', '2001:db8:1:2::2', '2001:db8:1:2::3']);
    expect(inSourceAddresses(['2001:db8:1:2::/64'], '2001:db8:1:2::ffff')).toBe(true);
    expect(inSourceAddresses(['2001:db8:1:2::/64'], '2001:db8:1:3::1')).toBe(false);
    expect(inSourceAddresses(['127.0.0.2/31'], '127.0.0.4')).toBe(false);
  });

  it('refuses what is not an address or a block, naming the field and the entry', () => {
    const parse = (sourceAddresses: unknown) => localProviderSchema.safeParse({ name: 'local', type: 'local', proxies: { sourceAddresses } });
    expect(parse(['127.0.0.2', '2001:db8::/64']).success).toBe(true);
    for (const bad of ['300.1.1.1', '10.0.0.0/33', '2001:db8::/129', 'example.com', '10.0.0.1/8/2', '0x7f.1', '10.0.0.0/ 8', '']) {
      const result = parse(['127.0.0.2', bad]);
      expect(result.success, bad).toBe(false);
      const issue = result.error?.issues[0];
      expect(issue?.path).toEqual(['proxies', 'sourceAddresses', 1]);
      expect(issue?.message).toContain('is not an IP address or a CIDR block');
    }
    expect(parse([]).error?.issues[0]?.path).toEqual(['proxies', 'sourceAddresses']);
    // As the configuration file reports it: the field's full path and the entry.
    expect(() =>
      parseConfigDocument({ providers: [{ name: 'local', type: 'local', proxies: { sourceAddresses: ['127.0.0.2', '10.0.0.0/33'] } }] }, 'egress.yaml'),
    ).toThrow('egress.yaml: providers[0].proxies.sourceAddresses[1]: "10.0.0.0/33" is not an IP address or a CIDR block');
    expect(parse('127.0.0.2').error?.issues[0]?.path).toEqual(['proxies', 'sourceAddresses']);
  });
});

let echo: { server: HttpServer; url: string };

beforeAll(async () => {
  const app = new Hono();
  app.route('/v1', echoRoute());
  echo = await new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) =>
      resolve({ server: server as HttpServer, url: `http://127.0.0.1:${info.port}/v1/echo` }),
    );
  });
});

afterAll(async () => {
  await new Promise<void>((resolve) => echo.server.close(() => resolve()));
});

describe('sourceAddresses: each local proxy sends from its own address', () => {
  let dataDir: string;
  let lifecycle: LocalLifecycle;

  beforeEach(async () => {
    dataDir = await tempDir('egress-srcaddr-');
    // The echo is on loopback: the proxies let exactly its GET through (the echo exception of the egress policy).
    const egressPolicy = proxyEgressPolicy(undefined, egressGuards({ redisUrl: 'redis://127.0.0.1:1', echoUrl: echo.url }));
    lifecycle = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy, sourceAddresses: ['127.0.0.2/31', '127.0.0.4'] });
  });

  afterEach(async () => {
    lifecycle.close();
    for await (const i of lifecycle.listInstances('fleet-s', signal()))
      await lifecycle.deleteInstance(i.name, undefined, { owner: i.owner, nameIsOurs: true }, signal());
    await waitFor('no proxy host left', async () => (await findHostProcesses(dataDir)).length === 0);
  });

  /** The address the echo saw for a request through the proxy (what readiness records as egressIp). */
  async function egressIp(instance: Instance): Promise<string | undefined> {
    const result = await probeProxy({ endpoint: instance.endpoint!, credentials: CREDS, echoUrl: echo.url, signal: AbortSignal.timeout(10_000) });
    expect(result).toMatchObject({ ok: true });
    return result.ok ? result.egressIp : undefined;
  }

  async function recorded(name: string): Promise<string | undefined> {
    const intent = JSON.parse(await readFile(join(dataDir, 'instances', name, 'intent.json'), 'utf8')) as { sourceAddress?: string };
    return intent.sourceAddress;
  }

  it('gives each proxy its own address, kept across a host restart, refused clearly when exhausted, freed by a delete', async () => {
    const proxies = [];
    for (const name of ['s1', 's2', 's3']) proxies.push(await lifecycle.ensureInstance(spec(name), signal()));
    expect(await Promise.all(proxies.map(egressIp))).toEqual(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    expect(await Promise.all(['s1', 's2', 's3'].map(recorded))).toEqual(['127.0.0.2', '127.0.0.3', '127.0.0.4']);

    await expect(lifecycle.ensureInstance(spec('s4'), signal())).rejects.toMatchObject({
      code: 'ERR_PROVISIONING',
      retryable: false,
      message: expect.stringContaining('sourceAddresses: every address is taken') as unknown,
    });

    // A crashed host brings every proxy back with its address.
    process.kill(Number(proxies[0]!.id.split(':')[0]), 'SIGKILL');
    await waitFor('host gone', async () => (await findHostProcesses(dataDir)).length === 0);
    const again = [];
    for (const name of ['s1', 's2', 's3']) again.push(await lifecycle.ensureInstance(spec(name), signal()));
    expect(again.map((i) => i.endpoint)).toEqual(proxies.map((i) => i.endpoint));
    expect(await Promise.all(again.map(egressIp))).toEqual(['127.0.0.2', '127.0.0.3', '127.0.0.4']);

    // A delete frees its address for the next proxy.
    await lifecycle.deleteInstance('s2', undefined, { owner: spec('s2').owner, nameIsOurs: true }, signal());
    const s4 = await lifecycle.ensureInstance(spec('s4'), signal());
    expect(await recorded('s4')).toBe('127.0.0.3');
    expect(await egressIp(s4)).toBe('127.0.0.3');
  });
});
