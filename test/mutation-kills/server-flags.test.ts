/**
 * The long-running commands' flags → AppConfig (src/cli/server-config.ts), in process: every flag
 * reaches its field (a flag validated and then ignored is a bug a user cannot see until it bites),
 * each range's ends, and the message a bad value exits 2 with. The same rules through the real CLI
 * are in test/config/. Written for the mutation run (docs/testing.md#mutation-testing).
 */
import { chmod, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { buildServerConfig, SERVER_FLAG_DEFAULTS, type ServerFlags } from '../../src/cli/server-config.ts';
import { DEFAULT_PREFIX } from '../../queues/names.ts';
import { tempDir } from '../support/temp-dirs.ts';

const WORKER = { defaultProviders: false, servesApi: false };
const API = { defaultProviders: false, servesApi: true };

const build = (flags: Partial<ServerFlags> = {}, options = WORKER) => buildServerConfig({ ...SERVER_FLAG_DEFAULTS, ...flags }, options);

async function refusal(flags: Partial<ServerFlags>, options = WORKER): Promise<string> {
  try {
    await build(flags, options);
  } catch (err) {
    expect(err).toMatchObject({ code: 'ERR_CONFIG' });
    return (err as Error).message;
  }
  throw new Error('the flags were accepted');
}

async function tokenFile(text: string, mode = 0o600): Promise<string> {
  const file = join(await tempDir('server-flags-'), 'tokens');
  await writeFile(file, text);
  await chmod(file, mode);
  return file;
}

describe('flag wiring: each flag reaches its field', () => {
  test('the defaults', async () => {
    const c = await build();
    expect(c.api).toEqual({
      host: '127.0.0.1',
      port: 8080,
      tokens: [],
      tokenNames: [],
      maxBodyBytes: 1024 * 1024,
      maxConnections: 1024,
      maxConnectionsPerPeer: 256,
      allowedHosts: [],
    });
    expect(c.worker).toEqual({ queues: ['checks', 'reconcile', 'gc'], concurrency: 10, lockDurationMs: 30_000, stalledIntervalMs: 30_000 });
    expect(c.readiness).toEqual({ failureThreshold: 1, successThreshold: 2, replaceAfterMs: 300_000, intervalMs: 5000, timeoutMs: 2000 });
    expect(c.events).toEqual({ maxCount: 10_000, maxAgeMs: 86_400_000 });
    expect(c.picks).toEqual({
      sessionTtlMs: 1_800_000,
      memberCacheMs: 1000,
      blockCooldownMs: 1_800_000,
      replaceDomains: 3,
      replaceWindowMs: 600_000,
      feedbackRate: 20,
      feedbackBurst: 100,
    });
    expect(c).toMatchObject({
      providers: [],
      echoUrl: undefined,
      metricsPort: undefined,
      recheckMs: 2000,
      resyncMs: 30_000,
      gcIntervalMs: 300_000,
      gcGraceMs: 600_000,
      gcDeletesPerSecond: 5,
      dataDir: resolve('.egress'),
      logLevel: 'info',
      shutdownGraceMs: 10_000,
      leaseMs: 15_000,
      backoffMs: 1000,
      retention: { completed: 1000, failed: 5000 },
      redis: { url: undefined, prefix: DEFAULT_PREFIX },
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  test('given values are used, not the defaults', async () => {
    const c = await build({
      maxBodySize: '64KiB',
      maxConnections: '16',
      maxConnectionsPerPeer: '3',
      port: '0',
      host: '::1',
      allowedHost: ['egress.local', 'egress.local:8080'],
      queues: ' gc , checks,gc',
      concurrency: '1000',
      lockDuration: '1m',
      stalledInterval: '45s',
      resyncInterval: '0',
      gcInterval: '0',
      gcGrace: '1h',
      gcDeletesPerSecond: '1000',
      dataDir: '/var/lib/egress',
      logLevel: 'silent',
      shutdownGrace: '3s',
      lease: '20s',
      prefix: '{fleet}:x',
      echoUrl: 'https://api.example/echo',
      metricsPort: '9464',
      probeFailures: '100',
      probeSuccesses: '100',
      probeInterval: '0',
      probeTimeout: '1m',
      replaceAfter: '10m',
      eventsMaxCount: '100',
      eventsMaxAge: '1m',
      pickSessionTtl: '10s',
      pickCache: '0',
      feedbackBlockCooldown: '1s',
      feedbackReplaceDomains: '1000',
      feedbackReplaceWindow: '168h',
      feedbackRate: '0.01',
      feedbackBurst: '100000',
      redisUrl: 'redis://127.0.0.1:6390',
    });
    expect(c.api).toMatchObject({
      host: '::1',
      port: 0,
      maxBodyBytes: 65_536,
      maxConnections: 16,
      maxConnectionsPerPeer: 3,
      allowedHosts: ['egress.local', 'egress.local:8080'],
    });
    expect(c.worker).toEqual({ queues: ['gc', 'checks'], concurrency: 1000, lockDurationMs: 60_000, stalledIntervalMs: 45_000 });
    expect(c.readiness).toEqual({ failureThreshold: 100, successThreshold: 100, replaceAfterMs: 600_000, intervalMs: 0, timeoutMs: 60_000 });
    expect(c.events).toEqual({ maxCount: 100, maxAgeMs: 60_000 });
    expect(c.picks).toEqual({
      sessionTtlMs: 10_000,
      memberCacheMs: 0,
      blockCooldownMs: 1000,
      replaceDomains: 1000,
      replaceWindowMs: 7 * 86_400_000,
      feedbackRate: 0.01,
      feedbackBurst: 100_000,
    });
    expect(c).toMatchObject({
      resyncMs: 0,
      gcIntervalMs: 0,
      gcGraceMs: 3_600_000,
      gcDeletesPerSecond: 1000,
      dataDir: '/var/lib/egress',
      logLevel: 'silent',
      shutdownGraceMs: 3000,
      leaseMs: 20_000,
      echoUrl: 'https://api.example/echo',
      metricsPort: 9464,
      redis: { url: 'redis://127.0.0.1:6390', prefix: '{fleet}:x' },
    });
  });

  test('--max-body-size takes bytes and binary units from 1KiB to 1GiB', async () => {
    expect((await build({ maxBodySize: '1024' })).api.maxBodyBytes).toBe(1024);
    expect((await build({ maxBodySize: '1GiB' })).api.maxBodyBytes).toBe(1024 ** 3);
    for (const bad of ['1023', '1025MiB', 'big', '0'])
      expect(await refusal({ maxBodySize: bad })).toBe(
        `--max-body-size: expected a size from 1KiB to 1GiB such as 1MiB, 512KiB or 65536 (bytes), got "${bad}"`,
      );
  });

  test('an API with tokens from --api-token-file: named and unnamed lines, comments and blanks skipped', async () => {
    const file = await tokenFile('# fleet tokens\n\nalice:aaaaaaaaaaaaaaaa\n  bbbbbbbbbbbbbbbb  \n');
    const c = await build({ apiTokenFile: file, host: '0.0.0.0' }, API);
    expect(c.api).toMatchObject({ host: '0.0.0.0', tokens: ['aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbb'], tokenNames: ['alice', '#2'] });
    expect(c.api).not.toHaveProperty('localTokenFile');
    expect(c.api).not.toHaveProperty('tokenFileWarning');
  });

  test('an API without tokens uses the data directory’s own token; --no-auth none at all', async () => {
    expect((await build({ dataDir: '/srv/egress' }, API)).api).toMatchObject({ localTokenFile: '/srv/egress/api-token', tokens: [] });
    const open = await build({ auth: false }, API);
    expect(open.api).toMatchObject({ noAuth: true });
    expect(open.api).not.toHaveProperty('localTokenFile');
    expect((await build({}, WORKER)).api).not.toHaveProperty('localTokenFile');
  });

  test('a token file others can read is refused, or used with a warning under --allow-open-token-file', async () => {
    const file = await tokenFile('cccccccccccccccc\n', 0o644);
    expect(await refusal({ apiTokenFile: file })).toContain('--api-token-file: ');
    const c = await build({ apiTokenFile: file, allowOpenTokenFile: true }, API);
    expect(c.api).toMatchObject({ allowOpenTokenFile: true, tokens: ['cccccccccccccccc'] });
    expect(c.api.tokenFileWarning).toMatch(
      /^--api-token-file: .* can be read by other users: every token in it is theirs too; used anyway \(--allow-open-token-file\)$/,
    );
  });
});

describe('flag rules and their messages', () => {
  test.each<[Partial<ServerFlags>, string]>([
    [{ port: '65536' }, '--port: expected an integer from 0 to 65535, got "65536"'],
    [{ port: '-1' }, '--port: expected an integer from 0 to 65535, got "-1"'],
    [{ port: '80.5' }, '--port: expected an integer from 0 to 65535, got "80.5"'],
    [{ logLevel: 'loud' }, '--log-level: expected one of trace, debug, info, warn, error, fatal, silent, got "loud"'],
    [{ prefix: 'egress' }, '--prefix: must start with a hash tag such as {egress} so that Redis Cluster keeps every key in one slot, got "egress"'],
    [{ prefix: '{}x' }, '--prefix: must start with a hash tag such as {egress} so that Redis Cluster keeps every key in one slot, got "{}x"'],
    [{ prefix: 'x{egress}' }, '--prefix: must start with a hash tag such as {egress} so that Redis Cluster keeps every key in one slot, got "x{egress}"'],
    [{ maxConnections: '15' }, '--max-connections: expected an integer from 16 to 1000000, got "15"'],
    [{ maxConnections: '1000001' }, '--max-connections: expected an integer from 16 to 1000000, got "1000001"'],
    [{ maxConnectionsPerPeer: '0' }, '--max-connections-per-peer: expected an integer from 1 to 1000000, got "0"'],
    [
      { allowedHost: ['ok.example', 'bad host'] },
      '--allowed-host: expected a host name or address with an optional port (egress.local, egress.local:8080), got "bad host"',
    ],
    [{ queues: ' , ' }, '--queues: expected at least one queue'],
    [{ queues: 'checks,mail' }, '--queues: unknown queue "mail" (known: checks, reconcile, gc)'],
    [{ concurrency: '0' }, '--concurrency: expected an integer from 1 to 1000, got "0"'],
    [{ concurrency: '1001' }, '--concurrency: expected an integer from 1 to 1000, got "1001"'],
    [{ lockDuration: '0' }, '--lock-duration: expected a positive duration such as 30s, got "0"'],
    [{ stalledInterval: 'soon' }, '--stalled-interval: expected a positive duration such as 30s, got "soon"'],
    [{ shutdownGrace: '0s' }, '--shutdown-grace: expected a positive duration such as 30s, got "0s"'],
    [{ lease: '-1s' }, '--lease: expected a positive duration such as 30s, got "-1s"'],
    [{ resyncInterval: 'x' }, '--resync-interval: expected a duration such as 5m (0 for off), got "x"'],
    [{ gcInterval: '-5m' }, '--gc-interval: expected a duration such as 5m (0 for off), got "-5m"'],
    [{ gcGrace: 'later' }, '--gc-grace: expected a duration such as 5m (0 for off), got "later"'],
    [{ echoUrl: 'ftp://api.example/echo' }, '--echo-url: expected an http:// or https:// URL, got "ftp://api.example/echo"'],
    [{ echoUrl: 'not a url' }, '--echo-url: expected an http:// or https:// URL, got "not a url"'],
    [{ metricsPort: '70000' }, '--metrics-port: expected an integer from 0 to 65535, got "70000"'],
    [{ probeInterval: '999ms' }, '--probe-interval: expected 0 (probe only on the resync) or at least 1s, got "999ms"'],
    [{ probeInterval: '-1s' }, '--probe-interval: expected a duration such as 5m (0 for off), got "-1s"'],
    [
      { probeInterval: '4s', probeTimeout: '2001ms' },
      '--probe-timeout: must be at most half of --probe-interval (4s): a probe has two steps under it, got "2001ms"',
    ],
    [{ probeTimeout: '0' }, '--probe-timeout: expected a positive duration such as 30s, got "0"'],
    [{ probeFailures: '0' }, '--probe-failures: expected an integer from 1 to 100, got "0"'],
    [{ probeSuccesses: '101' }, '--probe-successes: expected an integer from 1 to 100, got "101"'],
    [{ replaceAfter: '0' }, '--replace-after: expected a positive duration such as 30s, got "0"'],
    [{ eventsMaxAge: '59s' }, '--events-max-age: expected a duration from 1m to 2160h (90 days) such as 24h, got "59s"'],
    [{ eventsMaxAge: '2161h' }, '--events-max-age: expected a duration from 1m to 2160h (90 days) such as 24h, got "2161h"'],
    [{ eventsMaxCount: '99' }, '--events-max-count: expected an integer from 100 to 1000000, got "99"'],
    [{ eventsMaxCount: '1000001' }, '--events-max-count: expected an integer from 100 to 1000000, got "1000001"'],
    [{ pickSessionTtl: '9s' }, '--pick-session-ttl: expected a duration from 10s to 168h such as 30m, got "9s"'],
    [{ pickSessionTtl: '169h' }, '--pick-session-ttl: expected a duration from 10s to 168h such as 30m, got "169h"'],
    [{ pickCache: '11s' }, '--pick-cache: expected a duration from 0 to 10s such as 1s, got "11s"'],
    [{ pickCache: 'x' }, '--pick-cache: expected a duration from 0 to 10s such as 1s, got "x"'],
    [{ feedbackBlockCooldown: '999ms' }, '--feedback-block-cooldown: expected a duration from 1s to 168h such as 30m, got "999ms"'],
    [{ feedbackBlockCooldown: '169h' }, '--feedback-block-cooldown: expected a duration from 1s to 168h such as 30m, got "169h"'],
    [{ feedbackReplaceDomains: '0' }, '--feedback-replace-domains: expected an integer from 1 to 1000, got "0"'],
    [{ feedbackReplaceDomains: '1001' }, '--feedback-replace-domains: expected an integer from 1 to 1000, got "1001"'],
    [{ feedbackReplaceWindow: '999ms' }, '--feedback-replace-window: expected a duration from 1s to 168h such as 10m, got "999ms"'],
    [{ feedbackReplaceWindow: '169h' }, '--feedback-replace-window: expected a duration from 1s to 168h such as 10m, got "169h"'],
    [{ feedbackRate: '0.009' }, '--feedback-rate: expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got "0.009"'],
    [{ feedbackRate: '10001' }, '--feedback-rate: expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got "10001"'],
    [{ feedbackRate: ' ' }, '--feedback-rate: expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got " "'],
    [{ feedbackRate: 'Infinity' }, '--feedback-rate: expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got "Infinity"'],
    [{ feedbackBurst: '0' }, '--feedback-burst: expected an integer from 1 to 100000, got "0"'],
    [{ feedbackBurst: '100001' }, '--feedback-burst: expected an integer from 1 to 100000, got "100001"'],
    [
      { gcDeletesPerSecond: '1000.5' },
      '--gc-deletes-per-second: expected a number of deletions per second above 0 and at most 1000 (such as 5 or 0.5), got "1000.5"',
    ],
  ])('%j is refused: %s', async (flags, message) => {
    expect(await refusal(flags)).toBe(message);
  });

  test('the range ends are accepted', async () => {
    const c = await build({
      port: '65535',
      maxConnections: '1000000',
      maxConnectionsPerPeer: '1000000',
      probeInterval: '1s',
      probeTimeout: '500ms',
      eventsMaxAge: '2160h',
      eventsMaxCount: '1000000',
      pickSessionTtl: '168h',
      pickCache: '10s',
      feedbackBlockCooldown: '168h',
      feedbackReplaceDomains: '1',
      feedbackReplaceWindow: '1s',
      feedbackRate: '10000',
      feedbackBurst: '1',
      probeFailures: '1',
      probeSuccesses: '1',
    });
    expect(c.api).toMatchObject({ port: 65535, maxConnections: 1_000_000, maxConnectionsPerPeer: 1_000_000 });
    expect(c.readiness).toMatchObject({ intervalMs: 1000, timeoutMs: 500, failureThreshold: 1, successThreshold: 1 });
    expect(c.events).toEqual({ maxCount: 1_000_000, maxAgeMs: 2160 * 3_600_000 });
    expect(c.picks).toMatchObject({
      sessionTtlMs: 168 * 3_600_000,
      memberCacheMs: 10_000,
      blockCooldownMs: 168 * 3_600_000,
      replaceDomains: 1,
      replaceWindowMs: 1000,
      feedbackRate: 10_000,
      feedbackBurst: 1,
    });
  });

  test('a probe timeout of exactly half the interval is accepted; with probing off any timeout is', async () => {
    expect((await build({ probeInterval: '4s', probeTimeout: '2s' })).readiness.timeoutMs).toBe(2000);
    expect((await build({ probeInterval: '0', probeTimeout: '10m' })).readiness.timeoutMs).toBe(600_000);
  });

  test('binding beyond loopback: an API needs tokens; a worker only when it serves metrics there', async () => {
    expect(await refusal({ host: '0.0.0.0' }, API)).toBe('--host: binding 0.0.0.0 (not loopback) requires --api-token-file');
    expect(await refusal({ host: '10.1.2.3', metricsPort: '9464' })).toBe(
      '--host: binding the --metrics-port listener on 10.1.2.3 (not loopback) requires --api-token-file',
    );
    expect((await build({ host: '10.1.2.3' })).api.host).toBe('10.1.2.3');
    for (const host of ['localhost', '127.0.0.1', '127.9.9.9', '::1']) expect((await build({ host }, API)).api.host).toBe(host);
    expect(await refusal({ host: '128.0.0.1' }, API)).toContain('(not loopback) requires --api-token-file');
    expect(await refusal({ host: '::2' }, API)).toContain('(not loopback) requires --api-token-file');
    expect(await refusal({ host: 'example.com' }, API)).toContain('(not loopback) requires --api-token-file');
  });

  test('--no-auth only on loopback and never with a token file', async () => {
    expect(await refusal({ auth: false, host: '0.0.0.0' }, API)).toBe(
      '--no-auth: only on a loopback bind: --host 0.0.0.0 would open the API to the network without a token',
    );
    const file = await tokenFile('dddddddddddddddd\n');
    expect(await refusal({ auth: false, apiTokenFile: file }, API)).toBe('--no-auth: contradicts --api-token-file: give one of them');
  });

  test('token files: at least one token, each of 16 characters or more, names unique', async () => {
    const empty = await tokenFile('# nothing\n\n');
    expect(await refusal({ apiTokenFile: empty })).toBe(`--api-token-file: ${empty} holds no token (one token a line)`);
    const short = await tokenFile('eeeeeeeeeeeeeeee\nbob:short\n');
    expect(await refusal({ apiTokenFile: short })).toBe(`--api-token-file: every token in ${short} must be at least 16 characters (token bob is shorter)`);
    const shortUnnamed = await tokenFile('eeeeeeeeeeeeeeee\nfffffffffffffff\n');
    expect(await refusal({ apiTokenFile: shortUnnamed })).toBe(
      `--api-token-file: every token in ${shortUnnamed} must be at least 16 characters (token #2 is shorter)`,
    );
    const twice = await tokenFile('ann:gggggggggggggggg\nann:hhhhhhhhhhhhhhhh\n');
    expect(await refusal({ apiTokenFile: twice })).toBe(`--api-token-file: ${twice} names two tokens "ann": names must be unique`);
    // Unnamed tokens are told apart by position, so two of them are fine; exactly 16 characters is enough.
    const c = await build({ apiTokenFile: await tokenFile('iiiiiiiiiiiiiiii\njjjjjjjjjjjjjjjj\n') }, API);
    expect(c.api.tokenNames).toEqual(['#1', '#2']);
    // A name is a letter then letters, digits, . _ -: anything else is part of the token.
    const odd = await build({ apiTokenFile: await tokenFile('1x:kkkkkkkkkkkkkkkk\n') }, API);
    expect(odd.api).toMatchObject({ tokens: ['1x:kkkkkkkkkkkkkkkk'], tokenNames: ['#1'] });
    const dotted = await build({ apiTokenFile: await tokenFile('ci.bot-1_a:llllllllllllllll\n') }, API);
    expect(dotted.api).toMatchObject({ tokens: ['llllllllllllllll'], tokenNames: ['ci.bot-1_a'] });
  });

  test('an unreadable token file names the flag and the file', async () => {
    const missing = join(await tempDir('server-flags-'), 'none');
    expect(await refusal({ apiTokenFile: missing })).toMatch(new RegExp(`^--api-token-file: cannot read ${missing}: `));
  });
});

describe('Redis flags', () => {
  test('REDIS_URL must be redis:// or rediss://; an empty one is none', async () => {
    expect(await refusal({ redisUrl: 'http://example' })).toBe('REDIS_URL: expected redis:// or rediss://, got "http:"');
    expect(await refusal({ redisUrl: 'nope' })).toBe('REDIS_URL: not a URL: "nope"');
    expect((await build({ redisUrl: '' })).redis.url).toBeUndefined();
    expect((await build({ redisUrl: 'rediss://r.example:6380', redisTls: true })).redis.url).toBe('rediss://r.example:6380');
  });

  test('--redis-lost-after: a duration, 5m by default, 0 for ever', async () => {
    expect((await build({})).redis.lostAfterMs).toBe(300_000);
    expect((await build({ redisLostAfter: '90s' })).redis.lostAfterMs).toBe(90_000);
    expect((await build({ redisLostAfter: '0' })).redis.lostAfterMs).toBe(0);
    expect(await refusal({ redisLostAfter: '-1s' })).toBe('--redis-lost-after: expected a duration such as 5m (0 for off), got "-1s"');
  });

  test('cluster nodes: host:port list, IPv6 in brackets, not with a URL', async () => {
    const c = await build({ redisClusterNodes: ' r1:7000, [::1]:7001 ,' });
    expect(c.redis).toEqual({
      url: undefined,
      clusterNodes: [
        { host: 'r1', port: 7000 },
        { host: '::1', port: 7001 },
      ],
      clusterTls: false,
      prefix: DEFAULT_PREFIX,
      lostAfterMs: 300_000,
    });
    expect((await build({ redisClusterNodes: 'r1:7000', redisTls: true })).redis).toMatchObject({ clusterTls: true });
    expect((await build({ redisClusterNodes: '' })).redis).not.toHaveProperty('clusterNodes');
    expect(await refusal({ redisClusterNodes: ',' })).toBe('--redis-cluster-nodes: expected host:port,… (at least one node)');
    for (const bad of ['r1', 'r1:0', 'r1:65536', 'r1:', ':7000', 'a b:1'])
      expect(await refusal({ redisClusterNodes: bad })).toBe(`--redis-cluster-nodes: expected host:port (port 1-65535, IPv6 as [::1]:7000), got "${bad}"`);
    expect((await build({ redisClusterNodes: 'r1:1,r2:65535' })).redis.clusterNodes).toEqual([
      { host: 'r1', port: 1 },
      { host: 'r2', port: 65535 },
    ]);
    expect(await refusal({ redisClusterNodes: 'r1:7000', redisUrl: 'redis://r' })).toBe(
      '--redis-cluster-nodes: give either --redis-url (REDIS_URL) or --redis-cluster-nodes (REDIS_CLUSTER_NODES), not both',
    );
  });

  test('--redis-tls needs rediss:// or a cluster', async () => {
    expect(await refusal({ redisTls: true, redisUrl: 'redis://r' })).toBe('--redis-tls: a redis:// URL is plain TCP: use rediss:// for TLS');
    expect(await refusal({ redisTls: true })).toBe(
      '--redis-tls: applies to --redis-url or --redis-cluster-nodes; the private redis-server speaks plain TCP on loopback',
    );
  });

  test('--redis-password-file: one line, put into the URL or the cluster options', async () => {
    const dir = await tempDir('server-flags-');
    const file = join(dir, 'password');
    await writeFile(file, 'p@ss word\n');
    expect((await build({ redisUrl: 'redis://r.example:6379/2', redisPasswordFile: file })).redis.url).toBe('redis://:p%40ss%20word@r.example:6379/2');
    expect((await build({ redisClusterNodes: 'r1:7000', redisPasswordFile: file })).redis).toMatchObject({ password: 'p@ss word' });
    await writeFile(file, 'crlf\r\n');
    expect((await build({ redisClusterNodes: 'r1:7000', redisPasswordFile: file })).redis).toMatchObject({ password: 'crlf' });
    expect(await refusal({ redisPasswordFile: file })).toBe(
      '--redis-password-file: applies to --redis-url or --redis-cluster-nodes; the private redis-server makes its own password',
    );
    expect(await refusal({ redisUrl: 'redis://:inline@r', redisPasswordFile: file })).toBe(
      '--redis-password-file: REDIS_URL already carries a password: give it in one place',
    );
    await writeFile(file, '\n');
    expect(await refusal({ redisUrl: 'redis://r', redisPasswordFile: file })).toBe(`--redis-password-file: ${file} is empty: it must hold the password`);
    await writeFile(file, 'two\nlines\n');
    expect(await refusal({ redisUrl: 'redis://r', redisPasswordFile: file })).toBe(`--redis-password-file: ${file} must hold the password on one line`);
    expect(await refusal({ redisUrl: 'redis://r', redisPasswordFile: join(dir, 'none') })).toMatch(/^--redis-password-file: cannot read .*none: /);
  });

  test('--redis-ca-file holds PEM certificates that parse, and applies only to TLS', async () => {
    const dir = await tempDir('server-flags-');
    const notPem = join(dir, 'not-pem');
    await writeFile(notPem, 'hello');
    expect(await refusal({ redisUrl: 'rediss://r', redisCaFile: notPem })).toBe(
      `--redis-ca-file: ${notPem} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
    );
    const badPem = join(dir, 'bad-pem');
    await writeFile(badPem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    expect(await refusal({ redisUrl: 'rediss://r', redisCaFile: badPem })).toMatch(
      new RegExp(`^--redis-ca-file: ${badPem} holds a certificate that does not parse: `),
    );
  });
});
