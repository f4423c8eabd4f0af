import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { expect, test } from 'vitest';
import { echoUrlFor } from '../../src/cli/start-roles.ts';
import { buildServerConfig, SERVER_FLAG_DEFAULTS } from '../../src/cli/server-config.ts';
import { ROOT, runCli } from '../support/cli.ts';

const doc = (name: string): Promise<string> => readFile(resolve(ROOT, 'docs', name), 'utf8');

test('operations.md states the echo URL a standalone worker really uses, and no --port it does not accept', async () => {
  const config = await buildServerConfig({ ...SERVER_FLAG_DEFAULTS }, { defaultProviders: false, servesApi: false });
  const workerDefault = echoUrlFor(config, undefined);
  expect(workerDefault).toBe('http://127.0.0.1:8080/v1/echo');
  // `up` probes through its own API, wherever it listens.
  expect(echoUrlFor(config, 'http://127.0.0.1:43210')).toBe('http://127.0.0.1:43210/v1/echo');
  expect(echoUrlFor({ ...config, echoUrl: 'http://api:8080/v1/echo' }, 'http://127.0.0.1:43210')).toBe('http://api:8080/v1/echo');

  const row = (await doc('operations.md')).split('\n').find((line) => line.includes('| `--echo-url` |'));
  expect(row).toBeDefined();
  expect(row).toContain(`\`${workerDefault}\``);
  expect(row).not.toContain('<--port>');

  // Why the row must not send a worker to --port: a worker has none.
  const run = await runCli(['worker', '--port', '9000']);
  expect(run.code).toBe(2);
  expect(run.err).toContain("unknown option '--port'");
});

test('proxies.md says one thing about a Failed proxy and the resync: left alone for its generation', async () => {
  const text = await doc('proxies.md');
  const sentences = text.replace(/\n/g, ' ').split(/(?<=\.)\s+/);
  const aboutFailedAndResync = sentences.filter((s) => s.includes('`Failed`') && /resync/.test(s));
  expect(aboutFailedAndResync.length).toBeGreaterThan(0);
  for (const s of aboutFailedAndResync) {
    expect(s, s).not.toMatch(/reconciled again at every resync|create is tried again then|retried at (the |every )?resync/);
  }
  expect(text).toMatch(/`Failed` is final for the proxy's generation: the periodic resync still asks for its reconcile,\s+which leaves it as it is/);
  expect(text).toMatch(/\*\*`Failed` is final for its generation\*\*: the periodic resync leaves a `Failed` proxy alone/);
});
