/**
 * More of the server flags (src/cli/server-config.ts) found unchecked by the mutation run: an http://
 * echo URL, the Redis CA file with a real certificate, a worker's metrics beside tokens, the store's
 * default, and errors keeping their cause. See server-flags.test.ts for the rest and
 * docs/testing.md#mutation-testing.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { buildServerConfig, SERVER_FLAG_DEFAULTS, type ServerFlags } from '../../src/cli/server-config.ts';
import { tempDir } from '../support/temp-dirs.ts';

const WORKER = { defaultProviders: false, servesApi: false };
const build = (flags: Partial<ServerFlags> = {}, options = WORKER) => buildServerConfig({ ...SERVER_FLAG_DEFAULTS, ...flags }, options);
const refusal = (flags: Partial<ServerFlags>, options = WORKER): Promise<unknown> =>
  build(flags, options).then(
    () => {
      throw new Error('the flags were accepted');
    },
    (err: unknown) => err,
  );

/** A self-signed CA certificate made once with openssl for these tests (not a secret: its key was thrown away). */
const CA_PEM = `-----BEGIN CERTIFICATE-----
MIIBjTCCATOgAwIBAgIUMp678Bpc9KrlhRCnUMIx1qZmIRcwCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQbXV0YXRpb24tdGVzdC1jYTAgFw0yNjEyMDIxNjUwNThaGA8y
MTI2MTEwODE2NTA1OFowGzEZMBcGA1UEAwwQbXV0YXRpb24tdGVzdC1jYTBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABHwtwKgvw9Ez0sl2nNwV746sr5wwWvecTeLK
iHQLKYvfXCa8SM07DCawSc2hBa1rlxffHmVFHrK+qLNVkHGnIF2jUzBRMB0GA1Ud
DgQWBBT0T/tgnyVQUBFBliOTmaXA46ykEjAfBgNVHSMEGDAWgBT0T/tgnyVQUBFB
liOTmaXA46ykEjAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIGbz
2PGUmfj/qpybaSayPB3ZM/R/g0qUDtXTECTEhECoAiEAxaQrgJlP1h3iOmfGyOVo
oudgdyxSTPUfdATdjLBx6ro=
-----END CERTIFICATE-----
`;

describe('server flags, continued', () => {
  test('an http:// echo URL is accepted as given', async () => {
    expect((await build({ echoUrl: 'http://127.0.0.1:8080/v1/echo' })).echoUrl).toBe('http://127.0.0.1:8080/v1/echo');
  });

  test('--events-max-age that is not a duration names its flag', async () => {
    expect(await refusal({ eventsMaxAge: 'x' })).toMatchObject({ message: '--events-max-age: expected a positive duration such as 30s, got "x"' });
  });

  test('--feedback-rate that is not a number is refused', async () => {
    expect(await refusal({ feedbackRate: 'abc' })).toMatchObject({
      message: '--feedback-rate: expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got "abc"',
    });
  });

  test('a cluster node with anything after its port is refused', async () => {
    expect(await refusal({ redisClusterNodes: 'r1:7000x' })).toMatchObject({
      message: '--redis-cluster-nodes: expected host:port (port 1-65535, IPv6 as [::1]:7000), got "r1:7000x"',
    });
  });

  test('a password file whose first line is empty is not a one-line password', async () => {
    const file = join(await tempDir('server-flags-'), 'password');
    await writeFile(file, '\nsecret\n');
    expect(await refusal({ redisUrl: 'redis://r', redisPasswordFile: file })).toMatchObject({
      message: `--redis-password-file: ${file} must hold the password on one line`,
    });
  });

  test('a worker serving metrics beyond loopback is fine with tokens', async () => {
    const file = join(await tempDir('server-flags-'), 'tokens');
    await writeFile(file, 'mmmmmmmmmmmmmmmm\n', { mode: 0o600 });
    const c = await build({ host: '10.1.2.3', metricsPort: '9464', apiTokenFile: file });
    expect(c).toMatchObject({ metricsPort: 9464, api: { host: '10.1.2.3', tokens: ['mmmmmmmmmmmmmmmm'] } });
  });

  test('without --store the store is Redis', async () => {
    const flags: Partial<ServerFlags> = { ...SERVER_FLAG_DEFAULTS };
    delete flags.store;
    expect((await buildServerConfig(flags as ServerFlags, WORKER)).store).toEqual({ kind: 'redis' });
  });

  test('files that cannot be read fail naming the flag, the file, and keep the cause', async () => {
    const dir = await tempDir('server-flags-');
    // A directory passes the mode check and then cannot be read as a file.
    const tokens = join(dir, 'tokens.d');
    await mkdir(tokens, { mode: 0o700 });
    const err = await refusal({ apiTokenFile: tokens });
    expect(err).toMatchObject({ code: 'ERR_CONFIG', path: '--api-token-file', cause: { code: 'EISDIR' } });
    expect((err as Error).message).toMatch(new RegExp(`^--api-token-file: cannot read ${tokens}: `));
    expect(await refusal({ redisUrl: 'redis://r', redisPasswordFile: join(dir, 'none') })).toMatchObject({
      path: '--redis-password-file',
      cause: { code: 'ENOENT' },
    });
    const ca = await refusal({ redisUrl: 'rediss://r', redisCaFile: join(dir, 'none') });
    expect(ca).toMatchObject({ path: '--redis-ca-file', cause: { code: 'ENOENT' } });
    expect((ca as Error).message).toMatch(/^--redis-ca-file: cannot read .*none: /);
    const bad = join(dir, 'bad.pem');
    await writeFile(bad, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    expect(await refusal({ redisUrl: 'rediss://r', redisCaFile: bad })).toMatchObject({ path: '--redis-ca-file', cause: expect.any(Error) });
  });

  test('--redis-ca-file: used with rediss:// or a cluster (which it turns to TLS); refused with redis:// or the private server', async () => {
    const file = join(await tempDir('server-flags-'), 'ca.pem');
    await writeFile(file, CA_PEM);
    expect((await build({ redisUrl: 'rediss://r.example:6380', redisCaFile: file })).redis).toEqual({
      url: 'rediss://r.example:6380',
      ca: CA_PEM,
      prefix: SERVER_FLAG_DEFAULTS.prefix,
      lostAfterMs: 300_000,
    });
    expect((await build({ redisClusterNodes: 'r1:7000', redisCaFile: file })).redis).toMatchObject({ clusterTls: true, ca: CA_PEM });
    expect((await build({ redisUrl: 'rediss://r' })).redis).not.toHaveProperty('ca');
    expect(await refusal({ redisUrl: 'redis://r', redisCaFile: file })).toMatchObject({
      message: '--redis-ca-file: a redis:// URL is plain TCP: use rediss:// to verify the server with this CA',
    });
    expect(await refusal({ redisCaFile: file })).toMatchObject({
      message: '--redis-ca-file: applies to --redis-url (rediss://) or --redis-cluster-nodes; the private redis-server speaks plain TCP on loopback',
    });
  });

  test('a cluster password goes into the cluster options only when given', async () => {
    expect((await build({ redisClusterNodes: 'r1:7000' })).redis).not.toHaveProperty('password');
  });
});
