import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { parseStoreSettings } from '../../src/cli/store-config.ts';
import { ConfigError } from '../../src/errors.ts';
import { runCli } from '../support/cli.ts';
import { tempDir } from '../support/temp-dirs.ts';

/** `--store` and the flags that reach the API server with `--store kubernetes`: checked at start, each mistake naming its flag. */
describe('store flags', () => {
  let dir: string;
  let kubeconfig: string;
  let token: string;

  beforeAll(async () => {
    dir = await tempDir('egress-store-flags-');
    kubeconfig = join(dir, 'kubeconfig');
    await writeFile(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{ name: c, cluster: { server: "https://127.0.0.1:6443" } }]',
        'users: [{ name: u, user: { token: abc } }]',
        'contexts: [{ name: ctx, context: { cluster: c, user: u, namespace: crawl } }, { name: bare, context: { cluster: c, user: u } }]',
        'current-context: ctx',
        '',
      ].join('\n'),
    );
    token = join(dir, 'token');
    await writeFile(token, 'fake-token\n');
  });

  test('redis is the default; kubernetes takes the namespace from the flag, else the context, else default', async () => {
    expect(await parseStoreSettings({ store: 'redis' })).toEqual({ kind: 'redis' });
    expect(await parseStoreSettings({ store: 'kubernetes', storeKubeconfig: kubeconfig })).toMatchObject({ kind: 'kubernetes', namespace: 'crawl' });
    expect(await parseStoreSettings({ store: 'kubernetes', storeKubeconfig: kubeconfig, storeContext: 'bare' })).toMatchObject({ namespace: 'default' });
    expect(await parseStoreSettings({ store: 'kubernetes', storeKubeconfig: kubeconfig, storeNamespace: 'egress' })).toMatchObject({ namespace: 'egress' });
    expect(
      await parseStoreSettings({
        store: 'kubernetes',
        storeServer: 'http://127.0.0.1:1',
        storeTokenFile: token,
        storeSkipTlsVerify: true,
        storeNamespace: 'x',
      }),
    ).toEqual({
      kind: 'kubernetes',
      connection: { server: 'http://127.0.0.1:1', tokenFile: token, skipTLSVerify: true },
      namespace: 'x',
    });
  });

  test('each mistake is a ConfigError naming the flag', async () => {
    const cases: [Parameters<typeof parseStoreSettings>[0], string][] = [
      [{ store: 'etcd' }, '--store: expected one of redis, kubernetes, got "etcd"'],
      [{ store: 'redis', storeNamespace: 'x' }, '--store-namespace: only used with --store kubernetes'],
      [{ store: 'kubernetes', storeContext: 'ctx' }, '--store-context: only used with --store-kubeconfig'],
      [{ store: 'kubernetes', storeKubeconfig: kubeconfig, storeContext: 'nope' }, `--store-context: context "nope" not found in "${kubeconfig}"`],
      [{ store: 'kubernetes', storeKubeconfig: join(dir, 'missing') }, '--store-kubeconfig: cannot load kubeconfig'],
      [
        { store: 'kubernetes', storeKubeconfig: kubeconfig, storeServer: 'https://x' },
        '--store-server: give either --store-kubeconfig or --store-server, not both',
      ],
      [{ store: 'kubernetes', storeServer: 'https://x' }, '--store-token-file: required with --store-server'],
      [{ store: 'kubernetes', storeServer: 'ftp://x', storeTokenFile: token }, '--store-server: expected an http:// or https:// URL, got "ftp://x"'],
      [{ store: 'kubernetes', storeServer: 'http://127.0.0.1:1', storeTokenFile: token }, '--store-server: a plain http:// server needs skipTLSVerify: true'],
      [{ store: 'kubernetes', storeServer: 'https://x', storeTokenFile: join(dir, 'nothing') }, `--store-token-file: cannot read ${join(dir, 'nothing')}`],
      [{ store: 'kubernetes', storeKubeconfig: kubeconfig, storeTokenFile: token }, '--store-token-file: only used with --store-server'],
      [{ store: 'kubernetes', storeKubeconfig: kubeconfig, storeNamespace: 'Bad_NS' }, '--store-namespace: expected a namespace name'],
    ];
    for (const [flags, message] of cases) {
      let error: unknown;
      try {
        await parseStoreSettings(flags);
      } catch (err) {
        error = err;
      }
      expect(error, message).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toContain(message);
    }
  });

  test('egress --check-config says where the objects live; a bad --store exits 2 naming it', async () => {
    const ok = await runCli(['scheduler', '--check-config', '--store', 'kubernetes', '--store-kubeconfig', kubeconfig]);
    expect(ok).toMatchObject({ code: 0 });
    expect(ok.out).toContain('store kubernetes (namespace crawl)');
    const bad = await runCli(['scheduler', '--check-config', '--store', 'etcd']);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--store: expected one of redis, kubernetes, got "etcd"');
  });
});
