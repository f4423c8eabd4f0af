import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';

const doc = (name: string, extra = '') =>
  `apiVersion: egress-proxies/v1\nkind: Proxy\nmetadata:\n  name: ${name}\n  labels: { team: crawl${extra} }\nspec:\n  provider: local\n`;

describe('the Proxy resource through the API and the CLI', () => {
  let config: AppConfig;
  let roles: RunningRoles;
  let api: string;
  let redis: Redis;
  let store: RedisProxyStore;
  let reconcile: Queue;

  beforeAll(async () => {
    config = testConfig({
      providers: [
        { name: 'local', type: 'local' },
        { name: 'other', type: 'local' },
      ],
    });
    roles = await runRoles(config, ['api'], silentLogger());
    api = roles.api?.url ?? '';
    redis = new Redis(inject('redisUrl'));
    store = new RedisProxyStore(redis, config.redis.prefix);
    reconcile = new Queue(QUEUES.reconcile, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: config.redis.prefix });
  });
  afterAll(async () => {
    await roles.close();
    await store.close();
    await reconcile.close();
    redis.disconnect();
  });

  const post = (body: string, type = 'application/yaml') => fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': type }, body });

  test('apply creates, is idempotent, and moves the generation only on change; each change asks for a reconcile', async () => {
    const created = await post(`${doc('p1')}---\n${doc('p2')}`);
    expect(created.status).toBe(200);
    expect(await created.json()).toEqual({
      items: [
        { name: 'p1', outcome: 'created', generation: 1 },
        { name: 'p2', outcome: 'created', generation: 1 },
      ],
    });
    expect(await (await post(doc('p1'))).json()).toEqual({ items: [{ name: 'p1', outcome: 'unchanged', generation: 1 }] });
    expect(await (await post(doc('p1', ', tier: gold'))).json()).toEqual({ items: [{ name: 'p1', outcome: 'configured', generation: 2 }] });
    const p1 = (await (await fetch(`${api}/v1/proxies/p1`)).json()) as ProxyView;
    expect(p1).toMatchObject({
      name: 'p1',
      labels: { team: 'crawl', tier: 'gold' },
      spec: { provider: 'local' },
      status: { phase: 'Pending', observedGeneration: 0 },
    });
    expect(p1.proxyUrl).toBeUndefined();
    const jobs = await reconcile.getJobs(['waiting']);
    expect(jobs.map((j) => j.data as unknown).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual([{ proxy: 'p1' }, { proxy: 'p2' }]);
  });

  test('a bad document set is rejected whole, with an error naming each field', async () => {
    const bad = `${doc('good-one')}---\nkind: Proxy\nmetadata: { name: Bad_Name }\nspec: { provider: local, colour: red }\n---\nmetadata: { name: x }\nspec: { provider: nowhere }\n`;
    const res = await post(bad);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; errors: string[] };
    expect(body.error).toBe('ERR_INVALID_PROXY');
    // Documents are counted from 1; every error of every document at once.
    expect(body.errors).toEqual([
      'document 2: metadata.name: expected a lower-case name of letters, digits and dashes, got "Bad_Name"',
      'document 2: spec: unknown key "colour"',
      'document 3: spec.provider: "nowhere" is not a configured provider (configured: local, other)',
    ]);
    const unknownProvider = await post(`${doc('good-one')}---\nmetadata: { name: x }\nspec: { provider: nowhere }\n`);
    expect(((await unknownProvider.json()) as { errors: string[] }).errors).toEqual([
      'document 2: spec.provider: "nowhere" is not a configured provider (configured: local, other)',
    ]);
    expect(await store.get('good-one')).toBeUndefined();
    const json = await post(JSON.stringify({ items: [{ metadata: { name: 'j' }, spec: {} }] }), 'application/json');
    expect(((await json.json()) as { errors: string[] }).errors).toEqual(['spec.provider: required']);
  });

  test('discovery returns ready proxies with credentials, filters by provider and label, and supports ETag polling', async () => {
    await post(`${doc('d1')}---\n${doc('d2')}---\nmetadata: { name: d3, labels: { team: ads } }\nspec: { provider: other }\n`);
    for (const name of ['d1', 'd3']) {
      await store.updateStatus(name, (p) => ({ ...p.status, phase: 'Ready', url: `http://127.0.0.1:${name === 'd1' ? 4001 : 4003}` }));
    }
    const res = await fetch(`${api}/v1/proxies?ready=true&label=team=crawl`);
    const etag = res.headers.get('etag') ?? '';
    const { items } = (await res.json()) as { items: ProxyView[] };
    expect(items.map((p) => p.name)).toEqual(['d1']);
    const creds = await store.credentials('d1');
    expect(items[0]?.proxyUrl).toBe(`http://${creds?.username}:${creds?.password}@127.0.0.1:4001`);
    expect(creds?.password.length).toBeGreaterThanOrEqual(32);

    const again = await fetch(`${api}/v1/proxies?ready=true&label=team=crawl`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    await store.updateStatus('d2', (p) => ({ ...p.status, phase: 'Ready', url: 'http://127.0.0.1:4002' }));
    const changed = await fetch(`${api}/v1/proxies?ready=true&label=team=crawl`, { headers: { 'if-none-match': etag } });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).not.toBe(etag);

    const text = await (await fetch(`${api}/v1/proxies?ready=true&provider=other&format=text`)).text();
    const d3 = await store.credentials('d3');
    expect(text).toBe(`http://${d3?.username}:${d3?.password}@127.0.0.1:4003\n`);
    expect((await fetch(`${api}/v1/proxies?ready=maybe`)).status).toBe(400);
    expect((await fetch(`${api}/v1/proxies?label=nokey`)).status).toBe(400);
  });

  test('delete marks the proxy Terminating; applying it again meanwhile is a conflict', async () => {
    await post(doc('gone'));
    const del = await fetch(`${api}/v1/proxies/gone`, { method: 'DELETE' });
    expect(del.status).toBe(202);
    expect(((await del.json()) as ProxyView).status.phase).toBe('Terminating');
    const reapply = await post(doc('gone'));
    expect(reapply.status).toBe(409);
    expect(await reapply.json()).toEqual({ error: 'ERR_PROXY_TERMINATING', message: 'proxy "gone" is being deleted; apply it again once it is gone' });
    expect((await fetch(`${api}/v1/proxies/nope`, { method: 'DELETE' })).status).toBe(404);
    // In a file of several, one proxy being deleted stops the whole apply before anything is written.
    const several = await post(`${doc('fresh-1')}---\n${doc('gone')}`);
    expect(several.status).toBe(409);
    expect(await several.json()).toEqual({
      error: 'ERR_PROXY_TERMINATING',
      message: 'rejected, nothing applied: proxy "gone" is being deleted; apply again once it is gone',
    });
    expect(await store.get('fresh-1')).toBeUndefined();
  });

  test('delete ?orphan=true marks the deletion as leaving the instance; a bad value is a 400 naming the parameter', async () => {
    await post(doc('orph'));
    const bad = await fetch(`${api}/v1/proxies/orph?orphan=yes`, { method: 'DELETE' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toBe('query parameter "orphan" must be true or false, got "yes"');
    expect((await store.get('orph'))?.metadata.deletionRequestedAt).toBeUndefined();
    const del = await fetch(`${api}/v1/proxies/orph`, { method: 'DELETE' });
    expect(((await del.json()) as ProxyView).metadata.orphanInstance).toBeUndefined();
    // A pending deletion turned into an orphaning one.
    const orphaned = await fetch(`${api}/v1/proxies/orph?orphan=true`, { method: 'DELETE' });
    expect(orphaned.status).toBe(202);
    expect(((await orphaned.json()) as ProxyView).metadata).toMatchObject({ orphanInstance: true, deletionRequestedAt: expect.any(String) });
  });

  test('egress apply, get proxies and delete proxy', async () => {
    const dir = await tempDir('egress-apply-');
    const file = join(dir, 'proxies.yaml');
    await writeFile(file, `${doc('cli-a')}---\n${doc('cli-b')}`);
    const applied = await runCli(['apply', '-f', file, '--api-url', api]);
    expect(applied).toMatchObject({ code: 0, out: 'proxy/cli-a created\nproxy/cli-b created\n' });
    const table = await runCli(['get', 'proxies', '--api-url', api]);
    expect(table.out.split('\n')[0]).toMatch(/^NAME\s+PROVIDER\s+PHASE\s+URL\s+AGE$/);
    expect(table.out).toMatch(/\ncli-a\s+local\s+Pending\s+\d+s\n/);
    const one = JSON.parse((await runCli(['get', 'proxy', 'cli-a', '-o', 'json', '--api-url', api])).out) as ProxyView;
    expect(one.name).toBe('cli-a');
    expect(await runCli(['delete', 'proxy', 'cli-b', '--api-url', api])).toMatchObject({ code: 0, out: 'proxy/cli-b deletion requested\n' });
    expect(await runCli(['delete', 'proxy', 'cli-a', '--orphan', '--api-url', api])).toMatchObject({
      code: 0,
      out: 'proxy/cli-a deletion requested (its instance is left in place)\n',
    });
    expect((await store.get('cli-a'))?.metadata.orphanInstance).toBe(true);
    const badFile = join(dir, 'bad.yaml');
    await writeFile(badFile, 'metadata: { name: x }\nspec: { provider: local, extra: 1 }\n');
    const rejected = await runCli(['apply', '-f', badFile, '--api-url', api]);
    expect(rejected).toMatchObject({ code: 1, err: 'error: rejected, nothing applied:\n  spec: unknown key "extra" (ERR_INVALID_PROXY)\n' });
    expect(await runCli(['apply', '--api-url', api])).toMatchObject({ code: 2, err: 'error: apply: -f/--filename is required\n' });
    expect((await runCli(['delete', 'pod', 'x', '--api-url', api])).code).toBe(2);
  });
});
