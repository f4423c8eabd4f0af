/**
 * Another account on the machine that runs `egress up` gets nothing from its API: by default the
 * API requires the data directory's own token (0600 in a 0700 directory), which the CLI of the
 * same user finds by itself; `--no-auth` is the explicit, loopback-only, warned way back.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmod, chown, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, inject, test } from 'vitest';
import { runCli, spawnEgress, type EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const NOBODY = 65534;
const running: EgressProcess[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});

async function up(dataDir: string, extra: string[] = []): Promise<{ proc: EgressProcess; url: string }> {
  const proc = spawnEgress(['up', '--port', '0', '--data-dir', dataDir, '--prefix', uniquePrefix(), '--queues', 'checks', ...extra], {
    REDIS_URL: inject('redisUrl'),
    EGRESS_LOG_LEVEL: 'info',
  });
  running.push(proc);
  await proc.waitForLog('egress is up: API ');
  const url = /egress is up: API (\S+),/.exec(proc.logs())?.[1] ?? '';
  return { proc, url };
}

/** `fetch` run by another user (uid 65534) in its own process: what a local account would get. */
async function fetchAsNobody(url: string, init: { method?: string; body?: string; type?: string } = {}): Promise<number> {
  const script = `fetch(${JSON.stringify(url)}, { method: ${JSON.stringify(init.method ?? 'GET')}, ${
    init.body === undefined ? '' : `body: ${JSON.stringify(init.body)}, headers: { 'content-type': ${JSON.stringify(init.type ?? 'application/yaml')} },`
  } }).then((r) => { process.stdout.write(String(r.status)); }, (e) => { process.stdout.write('error ' + e.message); });`;
  const child = spawn(process.execPath, ['-e', script], { uid: NOBODY, gid: NOBODY, cwd: '/', env: { PATH: process.env.PATH ?? '' } });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  await once(child, 'exit');
  return Number(out);
}

describe('egress up against the other local users', () => {
  test('the API requires the data directory’s token: another user gets 401 on discovery and on writes; /healthz and the echo stay open', async () => {
    const dataDir = join(await tempDir('egress-local-users-'), 'data');
    const { proc, url } = await up(dataDir);
    const tokenFile = join(dataDir, 'api-token');
    expect((await stat(tokenFile)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dataDir, 'api-header'))).mode & 0o777).toBe(0o600);
    expect((await stat(dataDir)).mode & 0o777).toBe(0o700);
    expect(proc.logs()).toContain(`API token: ${tokenFile} `);

    expect(await fetchAsNobody(`${url}/v1/proxies?format=text`)).toBe(401);
    expect(await fetchAsNobody(`${url}/v1/pools`)).toBe(401);
    expect(await fetchAsNobody(`${url}/metrics`)).toBe(401);
    expect(await fetchAsNobody(`${url}/v1/proxies`, { method: 'POST', body: 'kind: Proxy\nmetadata: { name: stolen }\nspec: { provider: local }\n' })).toBe(
      401,
    );
    expect(await fetchAsNobody(`${url}/healthz`)).toBe(200);
    expect(await fetchAsNobody(`${url}/v1/echo`)).toBe(200);

    // The owner's curl, with the header file the banner names, gets in.
    const header = (await readFile(join(dataDir, 'api-header'), 'utf8')).trim();
    const token = (await readFile(tokenFile, 'utf8')).trim().replace(/^local:/, '');
    expect(header).toBe(`Authorization: Bearer ${token}`);
    expect((await fetch(`${url}/v1/proxies`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    // Nothing was created by the other user.
    expect(((await (await fetch(`${url}/v1/proxies`, { headers: { authorization: `Bearer ${token}` } })).json()) as { items: unknown[] }).items).toEqual([]);
    // The token never reaches the log.
    expect(proc.logs()).not.toContain(token);
  });

  test('the CLI of the same user finds the running API and its token through --data-dir (or EGRESS_DATA_DIR); `egress token` prints it', async () => {
    const dataDir = join(await tempDir('egress-local-cli-'), 'data');
    const { proc, url } = await up(dataDir);
    const record = JSON.parse(await readFile(join(dataDir, 'api.json'), 'utf8')) as { url: string; pid: number };
    expect(record).toMatchObject({ url, pid: proc.child.pid });

    const viaFlag = await runCli(['get', 'proxies', '--data-dir', dataDir]);
    expect(viaFlag).toMatchObject({ code: 0, err: 'No proxies found\n' });
    const viaEnv = await runCli(['get', 'ph', '-o', 'json'], { EGRESS_DATA_DIR: dataDir });
    expect(viaEnv.code).toBe(0);
    expect(JSON.parse(viaEnv.out)).toHaveProperty('items');

    const token = await runCli(['token', '--data-dir', dataDir]);
    expect(token.code).toBe(0);
    expect(`local:${token.out.trim()}\n`).toBe(await readFile(join(dataDir, 'api-token'), 'utf8'));

    // Stopped: the record goes with it; the token stays for the next start.
    expect(await proc.stop()).toBe(0);
    await expect(stat(join(dataDir, 'api.json'))).rejects.toThrow(/ENOENT/);
    const again = await up(dataDir);
    expect(`local:${(await runCli(['token', '--data-dir', dataDir])).out.trim()}\n`).toBe(await readFile(join(dataDir, 'api-token'), 'utf8'));
    expect((await runCli(['get', 'ph', '--data-dir', dataDir])).code).toBe(0);
    expect(again.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  test('the data directory’s token goes only to the API that recorded it, never to another --api-url', async () => {
    const dataDir = join(await tempDir('egress-local-leak-'), 'data');
    await up(dataDir);
    const seen: IncomingHttpHeaders[] = [];
    const other = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"items":[]}');
    });
    other.listen(0, '127.0.0.1');
    await once(other, 'listening');
    try {
      const port = (other.address() as AddressInfo).port;
      const run = await runCli(['get', 'ph', '--data-dir', dataDir, '--api-url', `http://127.0.0.1:${port}`]);
      expect(run.code).toBe(0);
      expect(seen).toHaveLength(1);
      expect(seen[0]?.authorization).toBeUndefined();
    } finally {
      other.close();
    }
  });

  test('a token file other users can read is refused naming its path and mode (exit 2), unless --allow-open-token-file insists', async () => {
    const dir = await tempDir('egress-open-token-');
    const file = join(dir, 'tokens');
    await writeFile(file, 'ci:open-token-0123456789abcdef\n', { mode: 0o644 });
    await chmod(file, 0o644);
    const refused = await runCli(['api', '--api-token-file', file, '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(refused).toMatchObject({
      code: 2,
      err: `error: --api-token-file: ${file} (mode 0644, owner uid ${process.getuid?.() ?? 0}) can be read by other users: every token in it is theirs too; chmod 600 it, or pass --allow-open-token-file to use it anyway\n`,
    });
    const insisted = await runCli(['api', '--api-token-file', file, '--allow-open-token-file', '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(insisted.code).toBe(0);

    // A file of another owner shared only with a group (a Kubernetes Secret under fsGroup: 0440) is that owner's decision.
    const shared = join(dir, 'shared');
    await writeFile(shared, 'ci:shared-token-0123456789abcdef\n', { mode: 0o440 });
    await chmod(shared, 0o440);
    await chown(shared, NOBODY, process.getgid?.() ?? 0);
    expect((await runCli(['api', '--api-token-file', shared, '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' })).code).toBe(0);

    // The data directory's own token, opened up by someone, stops the next start.
    const dataDir = join(dir, 'data');
    const first = await up(dataDir);
    expect(await first.proc.stop()).toBe(0);
    await chmod(join(dataDir, 'api-token'), 0o644);
    const next = spawnEgress(['up', '--port', '0', '--data-dir', dataDir, '--prefix', uniquePrefix()], { REDIS_URL: inject('redisUrl') });
    running.push(next);
    expect(await next.exited).toBe(2);
    expect(next.logs()).toContain(`error: --data-dir: ${join(dataDir, 'api-token')} (mode 0644, owner uid`);
  });

  test('--no-auth keeps the tokenless API, on loopback only and with a warning; it contradicts --api-token-file', async () => {
    const dataDir = join(await tempDir('egress-no-auth-'), 'data');
    const { proc, url } = await up(dataDir, ['--no-auth']);
    expect(proc.logs()).toContain('--no-auth: the API requires no token: every user of this machine can read every proxy password');
    await waitFor('the tokenless API to answer', async () => (await fetch(`${url}/v1/proxies`)).status === 200);
    expect(await fetchAsNobody(`${url}/v1/proxies`)).toBe(200);
    await expect(stat(join(dataDir, 'api-token'))).rejects.toThrow(/ENOENT/);
    // The CLI still finds where it listens.
    expect((await runCli(['get', 'proxies', '--data-dir', dataDir])).code).toBe(0);

    const wide = await runCli(['up', '--no-auth', '--host', '0.0.0.0', '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(wide).toMatchObject({
      code: 2,
      err: 'error: --no-auth: only on a loopback bind: --host 0.0.0.0 would open the API to the network without a token\n',
    });
    const dir = await tempDir('egress-no-auth-tokens-');
    await writeFile(join(dir, 't'), 'x'.repeat(20), { mode: 0o600 });
    const both = await runCli(['up', '--no-auth', '--api-token-file', join(dir, 't'), '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(both).toMatchObject({ code: 2, err: 'error: --no-auth: contradicts --api-token-file: give one of them\n' });
  });
});
