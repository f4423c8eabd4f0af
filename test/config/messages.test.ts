import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { parseConfigDocument, parseYaml } from '../../src/config/file.ts';
import { InvalidProxyDocumentsError, parseProxyDocuments, validateProxyDocuments } from '../../src/proxies/parse-documents.ts';
import { runCli } from '../support/cli.ts';

// One wording for every message about bad input: `<where>: expected <what>, got <value>` or a
// plain statement; documents counted from 1; none of zod's own phrases.
const ZOD_WORDING =
  /Invalid (input|option|string|key|discriminator|URL)|Too (small|big)|received|expected a (object|array|integer)|expected an (string|number|boolean)|expected [a-z]+ to (have|be)|documents\[|document 0\b/;

function configMessage(yaml: string): string {
  try {
    parseConfigDocument(parseYaml(yaml, 'egress.yaml'), 'egress.yaml');
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('the configuration was accepted');
}

function proxyErrors(run: () => unknown): string[] {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidProxyDocumentsError);
    return (err as InvalidProxyDocumentsError).errors;
  }
  throw new Error('the documents were accepted');
}

const kvm = (host: string, provider = ''): string =>
  `providers:\n  - { name: k, type: kvm, hosts: [ { name: h, address: 10.0.0.5, privateKeyFile: /k, knownHostsFile: /kh${host} } ]${provider} }\n`;

describe('configuration file messages', () => {
  test.each([
    [kvm(', port: "22x"'), 'providers[0].hosts[0].port: expected a number, got "22x"'],
    [kvm(', port: 0'), 'providers[0].hosts[0].port: expected at least 1, got 0'],
    [kvm(', port: 70000'), 'providers[0].hosts[0].port: expected at most 65535, got 70000'],
    [kvm(', port: 22.5'), 'providers[0].hosts[0].port: expected an integer, got 22.5'],
    [kvm(', user: ""'), 'providers[0].hosts[0].user: must not be empty'],
    [kvm(', insecureIgnoreHostKey: yes'), 'providers[0].hosts[0].insecureIgnoreHostKey: expected a boolean, got "yes"'],
    [kvm('', ', idleTimeout: soon'), 'providers[0].idleTimeout: expected a duration such as 30s or 5m, got "soon"'],
    [kvm('', ', idleTimeout: -5'), 'providers[0].idleTimeout: expected at least 0, got -5'],
    [kvm('', ', idleTimeout: true'), 'providers[0].idleTimeout: expected a number or a string, got true'],
    [kvm('', ', proxies: { baseImageVolume: b, cloneMode: x }'), 'providers[0].proxies.cloneMode: expected one of overlay, copy, got "x"'],
    [kvm('', ', proxies: { baseImageVolume: b, memoryMiB: 16 }'), 'providers[0].proxies.memoryMiB: expected at least 32, got 16'],
    ...['999.1.1.1', '-bad-', 'a..b', '10.0.0.5:22', 'host_name', '1.2.3'].map((address) => [
      kvm('').replace('address: 10.0.0.5', `address: "${address}"`),
      `providers[0].hosts[0].address: expected an IPv4 or IPv6 address or a DNS host name, got "${address}"`,
    ]),
    ['providers: {}\n', 'providers: expected an array, got an object'],
    ['providers:\n  - [1]\n', 'providers[0]: expected an object, got an array'],
    ['providers:\n  - { name: x, type: aws }\n', 'providers[0].type: expected one of local, kvm, kubernetes, gcp, upstream, got "aws"'],
    ['providers:\n  - { name: x }\n', 'providers[0].type: required: one of local, kvm, kubernetes, gcp, upstream'],
    ['providers:\n  - { name: k, type: kvm, hosts: [] }\n', 'providers[0].hosts: must not be empty'],
    ['providers:\n  - { name: Bad_Name, type: local }\n', 'providers[0].name: expected a lower-case name of letters, digits and dashes, got "Bad_Name"'],
    [`providers:\n  - { name: ${'a'.repeat(64)}, type: local }\n`, 'providers[0].name: expected at most 63 characters, got 64 characters'],
    ['providers:\n  - { name: k, type: kubernetes, server: "not a url" }\n', 'providers[0].server: expected a URL, got "not a url"'],
    ['providers:\n  - { name: g, type: gcp }\n', 'providers[0].project: required'],
    ['providers:\n  - { name: l, type: local, colour: blue, size: 2 }\n', 'providers[0]: unknown keys "colour", "size"'],
    ['providers:\n  - { name: l, type: local }\n  - { name: l, type: local }\n', 'providers[1].name: duplicate provider name "l" (also providers[0])'],
    [
      'providers:\n  - { name: g, type: gcp, project: p, proxies: { image: i, firewall: { sourceRanges: [10.0.0.0/40] } } }\n',
      'providers[0].proxies.firewall.sourceRanges[0]: expected an address range in CIDR notation, such as 203.0.113.0/24, got "10.0.0.0/40"',
    ],
    ['other: 1\n', 'providers: required: list the providers, or write "providers: []" to run with none (and 1 more: unknown key "other")'],
  ])('%j', (yaml, message) => {
    const text = configMessage(yaml);
    expect(text).toBe(`egress.yaml: ${message}`);
    expect(text).not.toMatch(ZOD_WORDING);
  });

  test.each(['10.0.0.5', '::1', '2001:db8::7', 'host.example', 'beelink', 'kvm-1.lab.example.', '10.0.0.5.nip.io'])(
    'kvm host address %j is accepted',
    (address) => {
      const config = parseConfigDocument(parseYaml(kvm('').replace('address: 10.0.0.5', `address: "${address}"`), 'egress.yaml'), 'egress.yaml');
      const provider = config.providers[0];
      expect(provider?.type === 'kvm' && provider.hosts[0]?.address).toBe(address);
    },
  );

  test('through the CLI: exit 2 and the same one line', async () => {
    // --check-config validates and exits before anything connects anywhere.
    const dir = await mkdtemp(join(tmpdir(), 'egress-messages-'));
    try {
      const file = join(dir, 'egress.yaml');
      await writeFile(file, kvm(', port: "22x"'));
      expect(await runCli(['worker', '--check-config', '--config', file], { REDIS_URL: 'redis://127.0.0.1:1' })).toEqual({
        code: 2,
        out: '',
        err: `error: ${file}: providers[0].hosts[0].port: expected a number, got "22x"\n`,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

const doc = (name: string, spec = 'provider: local'): string => `metadata: { name: ${name} }\nspec: { ${spec} }\n`;

describe('Proxy document messages (API and `egress apply`)', () => {
  test.each([
    ['one document: no document number', doc('Bad_Name'), ['metadata.name: expected a lower-case name of letters, digits and dashes, got "Bad_Name"']],
    [
      'several: numbered from 1',
      `${doc('a')}---\n${doc('Bad_Name')}`,
      ['document 2: metadata.name: expected a lower-case name of letters, digits and dashes, got "Bad_Name"'],
    ],
    ['a wrong kind', `kind: Prox\n${doc('a')}`, ['kind: expected "Proxy", got "Prox"']],
    ['a missing section', 'metadata: { name: a }\n', ['spec: required']],
    ['a wrong type', doc('a', 'provider: 5'), ['spec.provider: expected a string, got 5']],
    ['an empty placement', doc('a', 'provider: local, placement: ""'), ['spec.placement: must not be empty']],
    ['an unknown key', doc('a', 'provider: local, colour: red'), ['spec: unknown key "colour"']],
    [
      'labels',
      `metadata: { name: a, labels: { -bad: x, team: ${'v'.repeat(70)} } }\nspec: { provider: local }\n`,
      [
        'metadata.labels.-bad: not an accepted key: expected a label key such as team or example.com/team',
        'metadata.labels.team: expected at most 63 characters, got 70 characters',
      ],
    ],
    ['a name twice', `${doc('a')}---\n${doc('b')}---\n${doc('a')}`, ['document 3: metadata.name: "a" appears twice (also document 1)']],
    ['documents that are not objects', '[1, "x"]\n', ['document 1: expected an object, got 1', 'document 2: expected an object, got "x"']],
    [
      'a broken second document',
      `${doc('a')}---\nkey: [unclosed\n`,
      [
        expect.stringMatching(
          /^document 2: not valid YAML: Flow sequence in block collection must be sufficiently indented and end with a \] at line \d+, column \d+$/,
        ),
      ],
    ],
    ['an alias to nothing', 'x: *nope\n', ['not valid YAML: Unresolved alias (the anchor must be set before the alias): nope']],
    ['nothing at all', '', ['no Proxy documents']],
  ])('%s', (_what, yaml, errors) => {
    const found = proxyErrors(() => parseProxyDocuments(yaml));
    expect(found).toEqual(errors);
    for (const line of found) expect(line).not.toMatch(ZOD_WORDING);
  });

  test('an unknown provider is reported with the other errors, in the same style', () => {
    expect(proxyErrors(() => parseProxyDocuments(`${doc('a')}---\n${doc('B')}---\n${doc('c', 'provider: nowhere')}`, { providers: ['local'] }))).toEqual([
      'document 2: metadata.name: expected a lower-case name of letters, digits and dashes, got "B"',
      'document 3: spec.provider: "nowhere" is not a configured provider (configured: local)',
    ]);
  });

  test('JSON lists and {items} are numbered the same way', () => {
    const expected = ['document 1: spec.provider: required', 'document 2: metadata: required', 'document 2: spec: required'];
    expect(proxyErrors(() => validateProxyDocuments({ items: [{ metadata: { name: 'j' }, spec: {} }, {}] }))).toEqual(expected);
    expect(proxyErrors(() => validateProxyDocuments([{ metadata: { name: 'j' }, spec: {} }, {}]))).toEqual(expected);
  });
});
