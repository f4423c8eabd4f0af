import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { POOL_LABEL, type Pool } from '../../src/model/pool-resource.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';

/** The pool commands against a real API (no worker: nothing is reconciled). */
describe('egress apply/get/delete/rotate pool', () => {
  let roles: RunningRoles;
  let api: string;
  let dir: string;
  const cli = (...args: string[]) => runCli([...args, '--api-url', api]);
  const file = async (name: string, text: string): Promise<string> => {
    const path = join(dir, name);
    await writeFile(path, text);
    return path;
  };
  const pool = (name: string, extra = '') =>
    `kind: ProxyPool\nmetadata: { name: ${name} }\nspec: { replicas: 2, template: { spec: { provider: local } }${extra} }\n`;
  const proxy = (name: string, extra = '') => `kind: Proxy\nmetadata: { name: ${name}${extra} }\nspec: { provider: local }\n`;

  beforeAll(async () => {
    roles = await runRoles(testConfig(), ['api'], silentLogger());
    api = roles.api?.url ?? '';
    dir = await tempDir('egress-pool-cli-');
  });
  afterAll(async () => {
    await roles.close();
  });

  test('a mixed file is checked whole: errors of both kinds at once, numbered as in the file, nothing applied', async () => {
    const path = await file(
      'bad.yaml',
      [
        proxy('fine'),
        pool('bad-pool', ', maxSurge: 0'),
        `metadata: { name: Nope }\nspec: { provider: local }\n`,
        pool('p2', ', spread: [{ provider: nowhere, weight: 1 }]'),
      ].join('---\n'),
    );
    const run = await cli('apply', '-f', path);
    expect(run.code).toBe(1);
    expect(run.out).toBe('');
    expect(run.err).toBe(
      [
        'error: rejected, nothing applied:',
        '  document 3: metadata.name: expected a lower-case name of letters, digits and dashes, got "Nope"',
        '  document 2: spec.maxSurge: expected at least 1, got 0',
        '  document 4: spec.spread[0].provider: "nowhere" is not a configured provider (configured: local)',
        '',
      ].join('\n'),
    );
    expect((await fetch(`${api}/v1/proxies/fine`)).status).toBe(404);
    // A Proxy carrying the pool label is refused in a mixed file too.
    const labelled = await cli('apply', '-f', await file('label.yaml', `${proxy('member', `, labels: { ${POOL_LABEL}: p }`)}---\n${pool('p')}`));
    expect(labelled).toMatchObject({ code: 1, out: '' });
    expect(labelled.err).toContain(`document 1: metadata.labels.${POOL_LABEL}: is set only by a ProxyPool on its members`);
  });

  test('a pool with a bad maxAge and an unknown provider gets both errors in one answer, as docs/pools.md shows', async () => {
    const text = `kind: ProxyPool\nmetadata: { name: both }\nspec: { replicas: 2, maxAge: 5s, template: { spec: { provider: gcp-eu } }, spread: [{ provider: nowhere, weight: 1 }] }\n`;
    const run = await cli('apply', '-f', await file('both.yaml', text));
    expect(run).toMatchObject({ code: 1, out: '' });
    expect(run.err.split('\n')).toEqual([
      'error: rejected, nothing applied:',
      '  spec.maxAge: expected a duration of at least 10s, such as 30m or 24h, got "5s"',
      '  spec.template.spec.provider: "gcp-eu" is not a configured provider (configured: local)',
      '  spec.spread[0].provider: "nowhere" is not a configured provider (configured: local) (ERR_INVALID_POOL)',
      '',
    ]);
    const proxy = await cli('apply', '-f', await file('proxy-both.yaml', 'kind: Proxy\nmetadata: { name: Bad }\nspec: { provider: nowhere }\n'));
    expect(proxy.err).toContain('metadata.name: expected a lower-case name');
    expect(proxy.err).toContain('spec.provider: "nowhere" is not a configured provider (configured: local)');
    expect((await fetch(`${api}/v1/pools/both`)).status).toBe(404);
  });

  test('apply, get (table, json, yaml), rotate and delete; usage errors exit 2', async () => {
    expect(await cli('apply', '-f', await file('pools.yaml', `${pool('alpha')}---\n${pool('beta')}`))).toEqual({
      code: 0,
      out: 'proxypool/alpha created\nproxypool/beta created\n',
      err: '',
    });
    expect((await cli('apply', '-f', await file('mixed.yaml', `${pool('alpha')}---\n${proxy('lone')}`))).out).toBe(
      'proxy/lone created\nproxypool/alpha unchanged\n',
    );
    const table = await cli('get', 'pools');
    expect(table.out).toMatch(/^NAME\s+DESIRED\s+READY\s+ROTATING\s+FAILED\s+AGE\nalpha\s+2\s+0\s+0\s+0\s+\d+s\nbeta\s+2\s+0\s+0\s+0\s+\d+s\n$/);
    const one = JSON.parse((await cli('get', 'pool', 'alpha', '-o', 'json')).out) as Pool & { members: unknown };
    expect(one).toMatchObject({ name: 'alpha', spec: { replicas: 2, maxSurge: 1 }, members: { phases: {}, items: [] } });
    const list = parse((await cli('get', 'pools', '-o', 'yaml')).out) as { items: Pool[] };
    expect(list.items.map((p) => p.name)).toEqual(['alpha', 'beta']);
    expect(await cli('rotate', 'pool', 'alpha')).toEqual({ code: 0, out: 'proxypool/alpha rotation requested (0 members to replace, surge-first)\n', err: '' });
    expect(await cli('delete', 'pool', 'beta')).toEqual({ code: 0, out: 'proxypool/beta deletion requested (its members are deleted first)\n', err: '' });
    expect((await cli('get', 'pool', 'nope')).err).toBe('error: pool "nope" not found (ERR_NOT_FOUND)\n');
    expect((await cli('get', 'pools', '-o', 'wide')).code).toBe(2);
    expect(await cli('delete', 'pool', 'alpha', '--orphan')).toMatchObject({ code: 2, err: 'error: --orphan: applies to a proxy, not a pool\n' });
    expect(await cli('rotate', 'proxy', 'alpha')).toMatchObject({ code: 2, err: 'error: rotate: unknown resource type "proxy" (known: pool)\n' });
    expect((await cli('get', 'pods')).err).toContain('known: providerhealth (ph), proxies (proxy), pools (pool)');
  });
});
