import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runCli } from '../support/cli.ts';

// A Redis URL nobody listens on: a file that got through validation would make the command try
// to connect here and fail with a connection error (exit 1) instead of naming the file (exit 2).
const DEAD_REDIS = { REDIS_URL: 'redis://127.0.0.1:1' };

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-cfg-file-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
async function withFile(text: string): Promise<string> {
  const file = join(dir, `egress-${++n}.yaml`);
  await writeFile(file, text);
  return file;
}

/** `a: &a [1]` then `count` aliases of it: the `yaml` library's resource-exhaustion guard counts them. */
function aliases(count: number): string {
  return `providers: []\nx-anchor: &a [1]\nx-aliases: [${Array.from({ length: count }, () => '*a').join(', ')}]\n`;
}

describe('the configuration file is an error unless it says what to run', () => {
  test.each([
    ['an empty file', ''],
    ['a comment-only file', '# providers come later\n\n# really\n'],
    ['a document marker alone', '---\n'],
  ])('%s: exit 2 naming the file, for --check-config and for a real start', async (_what, text) => {
    const file = await withFile(text);
    for (const args of [['up', '--check-config'], ['scheduler'], ['worker', '--check-config']]) {
      const run = await runCli([...args, '--config', file], DEAD_REDIS);
      expect(run.err).toBe(`error: ${file}: the configuration file is empty: list the providers, or write "providers: []" to run with none\n`);
      expect(run.code).toBe(2);
    }
  });

  test('a mapping without providers is an error naming the key', async () => {
    const file = await withFile('{}\n');
    const run = await runCli(['up', '--check-config', '--config', file], DEAD_REDIS);
    expect(run.err).toBe(`error: ${file}: providers: required: list the providers, or write "providers: []" to run with none\n`);
    expect(run.code).toBe(2);
  });

  test('`providers:` with no value is a wrong type, not "none"', async () => {
    const file = await withFile('providers:\n');
    const run = await runCli(['up', '--check-config', '--config', file], DEAD_REDIS);
    expect(run.err).toBe(`error: ${file}: providers: expected an array, got null\n`);
    expect(run.code).toBe(2);
  });

  test('`providers: []` is the explicit way to run with none', async () => {
    const file = await withFile('# nothing yet\nproviders: []\n');
    const run = await runCli(['up', '--check-config', '--config', file], DEAD_REDIS);
    expect(run.err).toBe('');
    expect(run.out).toBe('configuration OK: up, providers none\n');
    expect(run.code).toBe(0);
  });
});

describe('malformed YAML always exits 2 with `<file>: not valid YAML: …`', () => {
  test.each([
    ['an undefined alias', 'providers: [*nope]\n', 'Unresolved alias (the anchor must be set before the alias): nope'],
    ['100 aliases', aliases(100), 'more than 100 aliases'],
    [
      'a flow map left open',
      'providers: [ { name: local\n',
      'Flow map in block collection must be sufficiently indented and end with a } at line 2, column 1\n',
    ],
    ['a duplicate key', 'providers: []\nproviders: []\n', 'Map keys must be unique'],
    ['two documents', 'providers: []\n---\nproviders: []\n', 'Source contains multiple documents'],
    ['a tab-indented block', 'providers:\n\t- { name: local, type: local }\n', ''],
  ])('%s', async (_what, text, detail) => {
    const file = await withFile(text);
    for (const args of [['up', '--check-config'], ['worker']]) {
      const run = await runCli([...args, '--config', file], DEAD_REDIS);
      expect(run.err).toMatch(new RegExp(`^error: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: not valid YAML: `));
      expect(run.err).toContain(detail);
      expect(run.err.trim().split('\n')).toHaveLength(1);
      expect(run.code).toBe(2);
    }
  });

  test('a few aliases are fine', async () => {
    const file = await withFile(aliases(20));
    const run = await runCli(['up', '--check-config', '--config', file], DEAD_REDIS);
    // The aliases parse; the unknown keys holding them are then named by the schema.
    expect(run.err).toBe(`error: ${file}: unknown keys "x-anchor", "x-aliases"\n`);
    expect(run.code).toBe(2);
  });
});

describe('proxies.egressPolicy is validated like every other field', () => {
  test.each([
    ['local', 'allow', '10.0.0.0/33', 'providers[0].proxies.egressPolicy.allow[0]'],
    ['local', 'deny', 'not-an-address', 'providers[0].proxies.egressPolicy.deny[0]'],
    ['kubernetes', 'allow', '::1/129', 'providers[0].proxies.egressPolicy.allow[0]'],
  ])('%s: a bad %s entry %s exits 2 naming its path', async (type, list, value, path) => {
    const provider =
      type === 'local'
        ? `{ name: p, type: local, proxies: { egressPolicy: { ${list}: ["${value}"] } } }`
        : `{ name: p, type: kubernetes, proxies: { image: proxy:1, egressPolicy: { ${list}: ["${value}"] } } }`;
    const file = await withFile(`providers:\n  - ${provider}\n`);
    const run = await runCli(['up', '--check-config', '--config', file], DEAD_REDIS);
    expect(run.err).toBe(`error: ${file}: ${path}: expected a CIDR range such as 10.0.0.0/8 or fd00::/8, or an IP address, got "${value}"\n`);
    expect(run.code).toBe(2);
  });

  test('an unknown key in the policy is named', async () => {
    const file = await withFile('providers:\n  - { name: p, type: local, proxies: { egressPolicy: { allowed: ["10.0.0.0/8"] } } }\n');
    const run = await runCli(['up', '--check-config', '--config', file], DEAD_REDIS);
    expect(run.err).toBe(`error: ${file}: providers[0].proxies.egressPolicy: unknown key "allowed"\n`);
    expect(run.code).toBe(2);
  });

  test('a valid policy passes', async () => {
    const file = await withFile(
      'providers:\n  - { name: p, type: local, proxies: { egressPolicy: { allow: [127.0.0.1/32, "fd00::/8", 10.1.2.3], deny: [] } } }\n',
    );
    const run = await runCli(['up', '--check-config', '--config', file], DEAD_REDIS);
    expect(run.err).toBe('');
    expect(run.code).toBe(0);
  });
});
