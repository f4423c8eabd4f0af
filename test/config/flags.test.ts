import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, inject, test } from 'vitest';
import { resolveCheckSchedule } from '../../src/config/checks.ts';
import { runCli, spawnEgress } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';

// A Redis URL nobody listens on: if validation let anything through, the command would try
// to connect here and fail with a connection error instead of the flag's message.
const DEAD_REDIS = { REDIS_URL: 'redis://127.0.0.1:1' };

describe('check flags (validated before anything connects)', () => {
  test.each([
    [['--provider-check-interval=5s'], '--provider-check-interval: must be 0 (off) or at least 10s, got 5s'],
    [['--provider-check-interval=-1m'], '--provider-check-interval: must be 0 (off) or at least 10s, got -1m'],
    [['--provider-check-interval=soon'], '--provider-check-interval: expected a duration such as 30s or 1m, got "soon"'],
    [['--provider-check-timeout=-1s'], '--provider-check-timeout: must not be negative, got -1s'],
    [
      ['--provider-check-interval=20s', '--provider-check-timeout=30s'],
      '--provider-check-timeout: must not be longer than --provider-check-interval (20s), got 30s',
    ],
  ])('%j is rejected with exit 2 and a message naming the flag', async (flags, message) => {
    for (const role of ['scheduler', 'worker', 'up']) {
      const run = await runCli([role, ...flags], DEAD_REDIS);
      expect(run.code).toBe(2);
      expect(run.err).toBe(`error: ${message}\n`);
    }
  });

  test('the timeout defaults to min(15s, interval); 0 interval turns checks off', () => {
    expect(resolveCheckSchedule('1m', '0')).toEqual({ intervalMs: 60_000, timeoutMs: 15_000 });
    expect(resolveCheckSchedule('12s', '0')).toEqual({ intervalMs: 12_000, timeoutMs: 12_000 });
    expect(resolveCheckSchedule('0', '0')).toEqual({ intervalMs: 0, timeoutMs: 15_000 });
    expect(resolveCheckSchedule('30s', '30s')).toEqual({ intervalMs: 30_000, timeoutMs: 30_000 });
  });

  test('--provider-check-interval=12s alone starts, and SIGTERM stops it with exit 0', async () => {
    const proc = spawnEgress(['scheduler', '--provider-check-interval=12s', '--prefix', uniquePrefix()], { REDIS_URL: inject('redisUrl') });
    try {
      await proc.waitForLog('scheduler is now the leader');
    } finally {
      expect(await proc.stop()).toBe(0);
    }
  });

  test('other flags name themselves too', async () => {
    const cases: [string[], string][] = [
      [['worker', '--concurrency', '0'], '--concurrency: expected an integer from 1 to 1000, got "0"'],
      [['worker', '--queues', 'checks,nope'], '--queues: unknown queue "nope" (known: checks, reconcile, gc)'],
      [['api', '--port', 'http'], '--port: expected an integer from 0 to 65535, got "http"'],
      [['up', '--prefix', 'egress'], '--prefix: must start with a hash tag such as {egress} so that Redis Cluster keeps every key in one slot, got "egress"'],
      [['api', '--host', '0.0.0.0'], '--host: binding 0.0.0.0 (not loopback) requires --api-token-file'],
      [['up', '--log-level', 'loud'], '--log-level: expected one of trace, debug, info, warn, error, fatal, silent, got "loud"'],
    ];
    for (const [args, message] of cases) {
      const run = await runCli(args, DEAD_REDIS);
      expect(run.err).toBe(`error: ${message}\n`);
      expect(run.code).toBe(2);
    }
    const bad = await runCli(['up'], { REDIS_URL: 'http://example' });
    expect(bad.err).toBe('error: REDIS_URL: expected redis:// or rediss://, got "http:"\n');
    expect(bad.code).toBe(2);
  });

  test('the readiness probe flags name themselves', async () => {
    const cases: [string[], string][] = [
      [['worker', '--probe-interval', '500ms'], '--probe-interval: expected 0 (probe only on the resync) or at least 1s, got "500ms"'],
      [['up', '--probe-interval', 'often'], '--probe-interval: expected a duration such as 5m (0 for off), got "often"'],
      [['worker', '--probe-timeout', '0'], '--probe-timeout: expected a positive duration such as 30s, got "0"'],
      [
        ['up', '--probe-interval', '3s', '--probe-timeout', '2s'],
        '--probe-timeout: must be at most half of --probe-interval (3s): a probe has two steps under it, got "2s"',
      ],
      [['worker', '--probe-successes', '0'], '--probe-successes: expected an integer from 1 to 100, got "0"'],
      [['up', '--probe-failures', 'x'], '--probe-failures: expected an integer from 1 to 100, got "x"'],
    ];
    for (const [args, message] of cases) {
      const run = await runCli(args, DEAD_REDIS);
      expect(run.err).toBe(`error: ${message}\n`);
      expect(run.code).toBe(2);
    }
  });

  test('unknown options and commands are usage errors (exit 2)', async () => {
    expect((await runCli(['worker', '--frobnicate'])).code).toBe(2);
    expect((await runCli(['frobnicate'])).code).toBe(2);
    const retry = await runCli(['jobs', 'retry']);
    expect(retry.code).toBe(2);
    expect(retry.err).toBe('error: jobs retry: give either a job ID or --all-failed\n');
  });
});

describe('configuration file', () => {
  async function withFile(text: string): Promise<string> {
    const dir = await tempDir('egress-cfg-');
    const file = join(dir, 'egress.yaml');
    await writeFile(file, text);
    return file;
  }

  test.each([
    [
      'a wrong type names its path',
      `providers:\n  - { name: local, type: local }\n  - name: kvm-home\n    type: kvm\n    hosts: [ { name: beelink, address: 10.0.0.5, port: "22x", privateKeyFile: /k, knownHostsFile: /kh } ]\n`,
      'providers[1].hosts[0].port: expected a number, got "22x"',
    ],
    ['an unknown key is an error', `providers:\n  - { name: local, type: local, colour: blue }\n`, 'providers[0]: unknown key "colour"'],
    ['an unknown top-level key too', `provider: []\n`, 'unknown key "provider"'],
    [
      'duplicate provider names',
      `providers:\n  - { name: local, type: local }\n  - { name: local, type: local }\n`,
      'providers[1].name: duplicate provider name "local" (also providers[0])',
    ],
    [
      'an unknown provider type',
      `providers:\n  - { name: x, type: aws }\n`,
      'providers[0].type: expected one of local, kvm, kubernetes, gcp, upstream, got "aws"',
    ],
    [
      'a kvm host without known_hosts',
      `providers:\n  - name: k\n    type: kvm\n    hosts: [ { name: h, address: 127.0.0.1, privateKeyFile: /k } ]\n`,
      'providers[0].hosts[0].knownHostsFile: required unless insecureIgnoreHostKey is true',
    ],
    ['bad YAML', `providers: [ { name: local\n`, 'not valid YAML'],
  ])('%s', async (_what, text, message) => {
    const file = await withFile(text);
    const run = await runCli(['worker', '--config', file], DEAD_REDIS);
    expect(run.code).toBe(2);
    expect(run.err).toContain(`error: ${file}: `);
    expect(run.err).toContain(message);
    expect(run.err.trim().split('\n')).toHaveLength(1);
  });

  test('a missing file names the file', async () => {
    const run = await runCli(['worker', '--config', '/nonexistent/egress.yaml'], DEAD_REDIS);
    expect(run.code).toBe(2);
    expect(run.err).toMatch(/^error: \/nonexistent\/egress\.yaml: cannot read the configuration file: ENOENT/);
  });

  test('a valid file with every provider type parses, with defaults filled in', async () => {
    const file = await withFile(
      [
        'providers:',
        '  - { name: local, type: local }',
        '  - name: kvm-home',
        '    type: kvm',
        '    hosts: [ { name: beelink, address: 10.0.0.5, privateKeyFile: /k, knownHostsFile: /kh } ]',
        '  - { name: k8s, type: kubernetes, server: "https://10.0.0.1:6443", tokenFile: /t }',
        '  - { name: gce, type: gcp, project: my-project }',
      ].join('\n'),
    );
    const { loadConfigFile } = await import('../../src/config/file.ts');
    const parsed = await loadConfigFile(file);
    expect(parsed.providers.map((p) => p.name)).toEqual(['local', 'kvm-home', 'k8s', 'gce']);
    const kvm = parsed.providers[1];
    expect(kvm?.type === 'kvm' && kvm.hosts[0]).toMatchObject({ port: 22, user: 'root', pool: 'default', socketPath: '/var/run/libvirt/libvirt-sock' });
  });
});
