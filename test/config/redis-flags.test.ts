import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runCli } from '../support/cli.ts';
import { makeCa } from '../support/redis-peers.ts';

/**
 * The Redis flags (--redis-url, --redis-cluster-nodes, --redis-password-file, --redis-ca-file,
 * --redis-tls) are checked before anything connects: every mistake exits 2 naming its flag. The
 * nodes and URLs below have nobody listening; a flag let through would fail on connecting instead.
 */
describe('Redis connection flags', () => {
  let dir: string;
  let ca: string;
  let notPem: string;
  let badPem: string;
  let password: string;
  let empty: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'egress-redis-flags-'));
    // A real certificate: the CA file is parsed, not just looked at.
    await makeCa(dir, 'egress-test-ca');
    ca = join(dir, 'egress-test-ca.crt');
    notPem = join(dir, 'not.pem');
    await writeFile(notPem, 'hello\n');
    badPem = join(dir, 'bad.pem');
    await writeFile(badPem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    password = join(dir, 'password');
    await writeFile(password, 's3cret\n');
    empty = join(dir, 'empty');
    await writeFile(empty, '\n');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('each mistake exits 2 with a message naming the flag', async () => {
    const cases: [string[], Record<string, string>, string][] = [
      [['worker', '--redis-cluster-nodes', '127.0.0.1'], {}, '--redis-cluster-nodes: expected host:port (port 1-65535, IPv6 as [::1]:7000), got "127.0.0.1"'],
      [
        ['worker', '--redis-cluster-nodes', '127.0.0.1:1,h:99999'],
        {},
        '--redis-cluster-nodes: expected host:port (port 1-65535, IPv6 as [::1]:7000), got "h:99999"',
      ],
      [['worker'], { REDIS_CLUSTER_NODES: ',' }, '--redis-cluster-nodes: expected host:port,… (at least one node)'],
      [
        ['api', '--redis-cluster-nodes', '127.0.0.1:1'],
        { REDIS_URL: 'redis://127.0.0.1:1' },
        '--redis-cluster-nodes: give either --redis-url (REDIS_URL) or --redis-cluster-nodes (REDIS_CLUSTER_NODES), not both',
      ],
      [
        ['api', '--redis-url', 'redis://127.0.0.1:1', '--redis-ca-file', ca],
        {},
        '--redis-ca-file: a redis:// URL is plain TCP: use rediss:// to verify the server with this CA',
      ],
      [
        ['up', '--redis-ca-file', ca],
        {},
        '--redis-ca-file: applies to --redis-url (rediss://) or --redis-cluster-nodes; the private redis-server speaks plain TCP on loopback',
      ],
      [
        ['api', '--redis-url', 'rediss://127.0.0.1:1', '--redis-ca-file', join(dir, 'missing.crt')],
        {},
        `--redis-ca-file: cannot read ${join(dir, 'missing.crt')}: ENOENT: no such file or directory, open '${join(dir, 'missing.crt')}'`,
      ],
      [
        ['api', '--redis-url', 'rediss://127.0.0.1:1'],
        { REDIS_CA_FILE: notPem },
        `--redis-ca-file: ${notPem} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
      ],
      [
        ['worker', '--redis-cluster-nodes', '127.0.0.1:1', '--redis-password-file', empty],
        {},
        `--redis-password-file: ${empty} is empty: it must hold the password`,
      ],
      [
        ['worker', '--redis-password-file', password],
        { REDIS_URL: 'redis://:other@127.0.0.1:1' },
        '--redis-password-file: REDIS_URL already carries a password: give it in one place',
      ],
      [
        ['up', '--redis-password-file', password],
        {},
        '--redis-password-file: applies to --redis-url or --redis-cluster-nodes; the private redis-server makes its own password',
      ],
      [['worker', '--redis-url', 'redis://127.0.0.1:1', '--redis-tls'], {}, '--redis-tls: a redis:// URL is plain TCP: use rediss:// for TLS'],
    ];
    for (const [args, env, message] of cases) {
      const result = await runCli([...args, '--check-config'], env);
      expect({ args, err: result.err, code: result.code }).toEqual({ args, err: `error: ${message}\n`, code: 2 });
    }
    const bad = await runCli(['api', '--redis-url', 'rediss://127.0.0.1:1', '--redis-ca-file', badPem, '--check-config']);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(new RegExp(`^error: --redis-ca-file: ${badPem} holds a certificate that does not parse: `));
  });

  test('good combinations pass --check-config without connecting anywhere', async () => {
    for (const [args, env] of [
      [['worker', '--redis-cluster-nodes', '127.0.0.1:1,[::1]:2,redis-0.redis:6379', '--redis-password-file', password], {}],
      [['worker', '--redis-tls'], { REDIS_CLUSTER_NODES: 'redis-0.redis:6379' }],
      [['api', '--redis-password-file', password], { REDIS_URL: 'rediss://user@127.0.0.1:1/2', REDIS_CA_FILE: ca }],
    ] as [string[], Record<string, string>][]) {
      const result = await runCli([...args, '--check-config'], env);
      expect({ args, err: result.err, code: result.code }).toEqual({ args, err: '', code: 0 });
    }
  });
});
