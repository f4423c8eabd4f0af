/**
 * The upstream provider's endpoint list (src/providers/upstream/endpoints.ts) and the sync of the
 * proxies it declares (src/proxies/declared-proxies.ts), without any proxy running: files read
 * again when they change, passwords told to the secret registry and never quoted, a member's
 * endpoint and vendor session, and a sync that is level-triggered and idempotent.
 */
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import { upstreamProviderSchema } from '../../src/providers/upstream/config.ts';
import { endpointByHash, EndpointSource, hopFor, UpstreamEndpointsError } from '../../src/providers/upstream/endpoints.ts';
import { DECLARED_BY_LABEL, syncDeclaredProxies } from '../../src/proxies/declared-proxies.ts';
import { SecretRegistry } from '../../src/secrets/secret-registry.ts';
import { MemoryProxyStore } from '../../src/store/memory-proxy-store.ts';
import { tempDir } from '../support/temp-dirs.ts';

async function source(extra: Record<string, unknown> = {}): Promise<{ dir: string; endpoints: EndpointSource; secrets: SecretRegistry; file: string }> {
  const dir = await tempDir('egress-endpoints-');
  const file = join(dir, 'endpoints.txt');
  await writeFile(join(dir, 'pw'), 'first-password\n');
  await writeFile(file, '');
  const secrets = new SecretRegistry();
  const config = upstreamProviderSchema.parse({
    name: 'v',
    type: 'upstream',
    passwordFile: join(dir, 'pw'),
    endpointsFile: file,
    endpoints: [{ name: 'a1', url: 'http://alice@127.0.0.1:8888', labels: { tier: 'datacenter' } }],
    ...extra,
  });
  return { dir, file, secrets, endpoints: new EndpointSource(config, { logger: silentLogger(), secrets }) };
}

describe('upstream endpoints', () => {
  test('the configuration refuses an inline password, a scheme it cannot chain, and a template without {session}', () => {
    const parse = (endpoint: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      upstreamProviderSchema.safeParse({ name: 'v', type: 'upstream', endpoints: [{ name: 'e', ...endpoint }], ...extra }).success;
    expect(parse({ url: 'http://u:secret@127.0.0.1:1' })).toBe(false);
    expect(parse({ url: 'ftp://u@127.0.0.1:1' })).toBe(false);
    expect(parse({ url: 'socks5://u@127.0.0.1:1080' })).toBe(true);
    expect(parse({ url: 'https://u@vendor.example:8443' })).toBe(true);
    expect(parse({ url: 'http://u@127.0.0.1:1', usernameTemplate: '{user}-x' })).toBe(false);
  });

  test('config and file endpoints, each with its password, told to the secret registry; an edited file or password applies at the next read', async () => {
    const { dir, file, endpoints, secrets } = await source();
    await writeFile(file, '# list\nb2 socks5://bob:inline-secret@127.0.0.1:1080\nhttp://carol@10.1.2.3:3128  # named from its host\n');
    const list = await endpoints.current();
    expect(list.map((e) => [e.name, e.proxy, e.url, e.hop.username, e.hop.password])).toEqual([
      ['a1', 'v-a1', 'http://127.0.0.1:8888', 'alice', 'first-password'],
      ['b2', 'v-b2', 'socks5://127.0.0.1:1080', 'bob', 'inline-secret'],
      ['10-1-2-3-3128', 'v-10-1-2-3-3128', 'http://10.1.2.3:3128', 'carol', 'first-password'],
    ]);
    expect(list[0]?.labels).toEqual({ tier: 'datacenter' });
    expect(secrets.redact('x first-password inline-secret y')).toBe('x [redacted] [redacted] y');

    await writeFile(join(dir, 'pw'), 'rotated-password\n');
    await writeFile(file, 'b2 socks5://bob:inline-secret@127.0.0.1:1080\n');
    const next = await endpoints.current();
    expect(next.map((e) => [e.name, e.hop.password])).toEqual([
      ['a1', 'rotated-password'],
      ['b2', 'inline-secret'],
    ]);
  });

  test('a file line that is not an endpoint fails the whole read, without quoting the line', async () => {
    const { file, endpoints } = await source();
    await writeFile(file, 'b2 socks5://bob:do-not-quote@127.0.0.1\n');
    const err = await endpoints.current().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamEndpointsError);
    expect((err as Error).message).toMatch(/line 1: expected an http:\/\/, https:\/\/ or socks5:\/\/ URL with a host and a port/);
    expect((err as Error).message).not.toContain('do-not-quote');
  });

  test('a member gets an endpoint by hash that stays while others come and go, and its own vendor session', async () => {
    const { file, endpoints } = await source({ usernameTemplate: '{user}-session-{session}' });
    await writeFile(file, 'b1 http://bob@127.0.0.1:1001\nb2 http://bob@127.0.0.1:1002\nb3 http://bob@127.0.0.1:1003\n');
    const list = await endpoints.current();
    const chosen = endpointByHash(list, 'pool-web-x7k2q')!;
    // Dropping another endpoint keeps the member where it was.
    expect(
      endpointByHash(
        list.filter((e) => e === chosen || e.name !== list.find((x) => x !== chosen)?.name),
        'pool-web-x7k2q',
      ),
    ).toBe(chosen);
    expect(hopFor(chosen, 'pool-web-x7k2q').username).toBe(`${chosen.hop.username}-session-poolwebx7k2q`);
    const route = await endpoints.routeOf('pool-web-x7k2q');
    expect(route?.endpoint.name).toBe(chosen.name);
    // An endpoint's own Proxy goes to its endpoint, and nowhere once it is no longer listed.
    expect((await endpoints.routeOf('v-b2'))?.endpoint.name).toBe('b2');
    await writeFile(file, 'b1 http://bob@127.0.0.1:1001\n');
    expect(await endpoints.routeOf('v-b2')).toBeUndefined();
  });
});

describe('declared proxies', () => {
  test('created with their labels, put back when changed, deleted once no longer declared, and a second run changes nothing', async () => {
    const store = new MemoryProxyStore();
    const asked: string[] = [];
    const deps = { proxies: store, requestReconcile: (p: string) => Promise.resolve(void asked.push(p)), logger: silentLogger() };
    const signal = AbortSignal.timeout(10_000);
    // Someone else's proxy on the same provider (a pool member, one applied by hand) is never touched.
    await store.apply({ metadata: { name: 'by-hand', labels: {} }, spec: { provider: 'v' } });
    const first = await syncDeclaredProxies(
      'v',
      [
        { name: 'v-a1', labels: { tier: 'datacenter' } },
        { name: 'v-b2', labels: {} },
      ],
      deps,
      signal,
    );
    expect(first).toEqual({ created: ['v-a1', 'v-b2'], configured: [], deleted: [] });
    expect((await store.get('v-a1'))?.labels).toEqual({ tier: 'datacenter', [DECLARED_BY_LABEL]: 'v' });
    expect(
      await syncDeclaredProxies(
        'v',
        [
          { name: 'v-a1', labels: { tier: 'datacenter' } },
          { name: 'v-b2', labels: {} },
        ],
        deps,
        signal,
      ),
    ).toEqual({
      created: [],
      configured: [],
      deleted: [],
    });
    const later = await syncDeclaredProxies('v', [{ name: 'v-a1', labels: { tier: 'residential' } }], deps, signal);
    expect(later).toEqual({ created: [], configured: ['v-a1'], deleted: ['v-b2'] });
    expect((await store.get('v-b2'))?.metadata.deletionRequestedAt).toBeDefined();
    expect((await store.get('by-hand'))?.metadata.deletionRequestedAt).toBeUndefined();
    expect(asked).toEqual(['v-a1', 'v-b2', 'v-a1', 'v-b2']);
  });
});

describe('a vendor list URL', () => {
  test('read with its token, read again once stale, the last list kept while the vendor is down; never read: nothing', async () => {
    const dir = await tempDir('egress-list-url-');
    await writeFile(join(dir, 'token'), 'list-token-123\n');
    await writeFile(join(dir, 'pw'), 'vendor-pw\n');
    let list = 'g1 http://bob@127.0.0.1:1001\n';
    let up = true;
    const seen: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      seen.push(req.headers.authorization);
      if (!up) return void res.writeHead(503).end();
      res.end(list);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    let now = 0;
    const secrets = new SecretRegistry();
    const config = upstreamProviderSchema.parse({
      name: 'v',
      type: 'upstream',
      passwordFile: join(dir, 'pw'),
      endpointsUrl: { url: `http://127.0.0.1:${port}/proxies.txt?key=abc`, refresh: '1m', tokenFile: join(dir, 'token') },
    });
    const endpoints = new EndpointSource(config, { logger: silentLogger(), secrets, now: () => now });
    try {
      expect((await endpoints.current()).map((e) => [e.name, e.hop.password])).toEqual([['g1', 'vendor-pw']]);
      expect(seen).toEqual(['Bearer list-token-123']);
      expect(secrets.redact('list-token-123')).toBe('[redacted]');
      list = 'g1 http://bob@127.0.0.1:1001\ng2 http://bob@127.0.0.1:1002\n';
      now = 30_000;
      expect((await endpoints.current()).map((e) => e.name)).toEqual(['g1']);
      now = 61_000;
      expect((await endpoints.current()).map((e) => e.name)).toEqual(['g1', 'g2']);
      up = false;
      now = 200_000;
      expect((await endpoints.current()).map((e) => e.name)).toEqual(['g1', 'g2']);
      expect(seen).toHaveLength(3);

      const fresh = new EndpointSource(config, { logger: silentLogger(), secrets, now: () => now });
      const err = await fresh.current().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UpstreamEndpointsError);
      // The URL's query may carry a key: never shown.
      expect((err as Error).message).toBe(`cannot fetch the endpoint list http://127.0.0.1:${port}/proxies.txt: HTTP 503`);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
