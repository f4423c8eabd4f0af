import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { createLogger } from '../../src/logging.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';

const MiB = 1024 * 1024;
const proxyDoc = (name: string) => `apiVersion: egress-proxies/v1\nkind: Proxy\nmetadata:\n  name: ${name}\nspec:\n  provider: local\n`;

/** Starts a POST whose body the test writes itself; resolves the response as soon as the server sends one. */
function upload(url: string, headers: Record<string, string>): { req: ClientRequest; response: Promise<IncomingMessage> } {
  const req = request(url, { method: 'POST', headers });
  req.on('error', () => undefined); // the server may close while we still write: that is the point
  const response = once(req, 'response').then(([res]) => res as IncomingMessage);
  response.catch(() => undefined); // awaited by the tests that expect an answer
  req.flushHeaders();
  return { req, response };
}

async function bodyOf(res: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/**
 * `/healthz` answers 200 (no clock: an API the upload blocks never answers, and the test fails at
 * its timeout).
 */
async function healthzAnswers(api: string): Promise<void> {
  const res = await fetch(`${api}/healthz`);
  expect(res.status).toBe(200);
}

describe('request limits against a hostile client', () => {
  let roles: RunningRoles;
  let api: string;
  const logLines: string[] = [];

  beforeAll(async () => {
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    roles = await runRoles(testConfig(), ['api'], createLogger({ level: 'debug', destination }));
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles.close();
  });

  test('a body declared larger than 1 MiB is answered 413 before the rest is sent, while /healthz keeps answering', async () => {
    const { req, response } = upload(`${api}/v1/proxies`, { 'content-type': 'application/json', 'content-length': String(10 * MiB) });
    req.write(Buffer.alloc(64 * 1024, 0x20));
    await healthzAnswers(api);
    const res = await response; // only 64 KiB of 10 MiB were ever sent
    expect(res.statusCode).toBe(413);
    expect(await bodyOf(res)).toEqual({ error: 'ERR_BODY_TOO_LARGE', message: `the request body is larger than ${MiB} bytes (--max-body-size)` });
    req.destroy();
  });

  test('a chunked body without Content-Length is answered 413 once it passes 1 MiB, without waiting for its end', async () => {
    const { req, response } = upload(`${api}/v1/proxies`, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    for (let sent = 0; sent <= MiB; sent += chunk.length) {
      if (!req.write(chunk)) await Promise.race([once(req, 'drain'), response]);
    }
    await healthzAnswers(api);
    const res = await response; // the request was never ended
    expect(res.statusCode).toBe(413);
    expect(await bodyOf(res)).toMatchObject({ error: 'ERR_BODY_TOO_LARGE' });
    req.destroy();
  });

  test('a body just under the limit is read and judged (400 naming the problem, not 413)', async () => {
    const res = await fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `[${' '.repeat(MiB - 10)}]` });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: 'ERR_INVALID_PROXY', errors: ['no Proxy documents'] });
  });

  test('YAML nested thousands deep is a 400 naming the limit, for Proxies and ProxyPools alike, and the API goes on', async () => {
    const deep = '{"a":'.repeat(3000) + '1' + '}'.repeat(3000);
    for (const path of ['/v1/proxies', '/v1/pools']) {
      const res = await fetch(`${api}${path}`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: deep });
      expect(res.status).toBe(400);
      expect(JSON.stringify(await res.json())).toContain('the YAML nests collections deeper than 64 levels');
    }
    await healthzAnswers(api);
  });

  test('a large invalid document set returns the first 20 errors and a count of the rest', async () => {
    const res = await fetch(`${api}/v1/proxies`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(Array.from({ length: 500 }, () => ({ kind: 'Proxy' }))),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: string[]; message: string };
    expect(body.errors).toHaveLength(21);
    expect(body.errors[0]).toMatch(/^document 1: /);
    expect(body.errors[20]).toMatch(/^… and \d+ more errors$/);
    expect(body.message.length).toBeLessThan(4000);
    const many = await fetch(`${api}/v1/proxies`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(Array.from({ length: 5000 }, () => ({}))),
    });
    expect(many.status).toBe(400);
    expect(await many.json()).toMatchObject({ errors: ['5000 documents: at most 1000 are accepted at once'] });
  });

  test.each([
    ['an alias to no anchor', 'x: *nope\n', /^not valid YAML: Unresolved alias/],
    [
      'a document with 100+ aliases',
      `a: &a [1, 2]\n${Array.from({ length: 120 }, (_, i) => `b${i}: *a`).join('\n')}\n`,
      /^not valid YAML: Excessive alias count/,
    ],
    ['a broken second document', `${proxyDoc('fine')}---\nkey: [unclosed\n`, /^document 2: not valid YAML: /],
  ])('YAML with %s is a 400 naming the document and the problem', async (_what, yaml, expected) => {
    const res = await fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: yaml });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; errors: string[] };
    expect(body.error).toBe('ERR_INVALID_PROXY');
    expect(body.errors[0]).toMatch(expected);
  });

  test('?state= is de-duplicated (2,000 copies cost a handful of Redis calls), and unknown states are a 400 naming them', async () => {
    const redis = new Redis(inject('redisUrl'));
    const commands = async (): Promise<number> => Number(/total_commands_processed:(\d+)/.exec(await redis.info('stats'))?.[1]);
    try {
      const before = await commands();
      const dup = await fetch(`${api}/v1/jobs?state=${Array.from({ length: 2000 }, () => 'failed').join(',')}`);
      expect(dup.status).toBe(200);
      expect(await dup.json()).toEqual({ items: [] });
      expect((await commands()) - before).toBeLessThan(100);
    } finally {
      redis.disconnect();
    }
    const bad = await fetch(`${api}/v1/jobs?state=failed,bogus,failed,worse`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toMatch(
      /^query parameter "state" must be a comma-separated list of active, .*; unknown: "bogus", "worse"$/,
    );
  });

  test('a client that disconnects mid-upload is one debug line, not an error with a stack', async () => {
    const before = logLines.length;
    const { req } = upload(`${api}/v1/proxies`, { 'content-type': 'application/yaml', 'content-length': '100000' });
    await new Promise((resolve) => req.write(proxyDoc('half'), resolve));
    req.destroy();
    const line = await waitFor('a log line about the client going away', () => logLines.slice(before).find((l) => l.includes('client went away')));
    expect(JSON.parse(line)).toMatchObject({ level: 20, method: 'POST', path: '/v1/proxies' });
    expect(logLines.slice(before).filter((l) => (JSON.parse(l) as { level: number }).level >= 50)).toEqual([]);
    expect(logLines.slice(before).join('\n')).not.toContain('"stack"');
  });

  test('--max-body-size is validated and names itself', async () => {
    for (const bad of ['1MB', 'lots', '12', '2GiB']) {
      const run = await runCli(['api', '--max-body-size', bad], { REDIS_URL: 'redis://127.0.0.1:1' });
      expect(run.code).toBe(2);
      expect(run.err).toMatch(/^error: --max-body-size: expected a size from 1KiB to 1GiB/);
    }
    expect((await runCli(['api', '--max-body-size', '64KiB', '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' })).code).toBe(0);
  });
});

describe('--max-body-size is honoured', () => {
  test('a 4 KiB limit refuses a 5 KiB body and takes a 3 KiB one', async () => {
    const roles = await runRoles(testConfig({ maxBodyBytes: 4096 }), ['api'], createLogger({ level: 'silent' }));
    try {
      const api = roles.api?.url ?? '';
      const post = (size: number) =>
        fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `[${' '.repeat(size - 2)}]` });
      expect((await post(5 * 1024)).status).toBe(413);
      expect((await post(3 * 1024)).status).toBe(400);
    } finally {
      await roles.close();
    }
  });
});
