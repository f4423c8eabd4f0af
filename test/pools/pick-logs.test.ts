/** Picks and feedback at the most verbose log level: credentials handed out never reach a log line. */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { createLogger } from '../../src/logging.ts';
import { uniquePrefix } from '../support/config.ts';
import { pickConfig, PoolFixture } from './pick-support.ts';

const TOKEN = 'pick-logs-token-0123456789';
const lines: string[] = [];
const prefix = uniquePrefix();
let roles: RunningRoles;
let fixture: PoolFixture;

beforeAll(async () => {
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  fixture = new PoolFixture(prefix);
  await fixture.pool('web', 1);
  await fixture.member('web', 'web-aaaaa', 'http://127.0.0.1:4101');
  roles = await runRoles(pickConfig({ prefix, tokens: [TOKEN], queues: ['checks'] }), ['api'], createLogger({ level: 'trace', destination }));
});
afterAll(async () => {
  await roles.close();
  await fixture.close();
});

test('no log line carries a member’s password or the token', async () => {
  const api = roles.api?.url ?? '';
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const password = (await fixture.proxies.credentials('web-aaaaa'))?.password ?? '';
  expect(password.length).toBeGreaterThan(10);
  const text = await (await fetch(`${api}/v1/pools/web/pick?session=s1&domain=a.example&format=text`, { headers })).text();
  expect(text).toContain(password);
  await fetch(`${api}/v1/pools/web/pick?session=s1`, { headers });
  await fetch(`${api}/v1/pools/web/feedback`, { method: 'POST', headers, body: JSON.stringify({ outcome: 'blocked', domain: 'a.example', session: 's1' }) });
  await fetch(`${api}/v1/proxies/web-aaaaa/feedback`, { method: 'POST', headers, body: '{"outcome":"nope"' });
  expect((await fetch(`${api}/v1/pools/web/pick?domain=a.example`, { headers })).status).toBe(503);
  expect(lines.length).toBeGreaterThan(0);
  const all = lines.join('');
  expect(all).not.toContain(password);
  expect(all).not.toContain(TOKEN);
});
