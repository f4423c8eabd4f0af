/**
 * Deeply nested YAML is refused before the `yaml` library parses it: the library composes nodes
 * recursively, and a stack that runs out while V8 compiles one of its regular expressions ends the
 * process (an API fuzz seed crashed the API with `{"a":{"a":…` sent as YAML).
 */
import { describe, expect, test } from 'vitest';
import { InvalidProxyDocumentsError, MAX_NESTING, parseProxyDocuments } from '../../src/proxies/parse-documents.ts';
import { yamlNestingExceeds } from '../../src/proxies/yaml-nesting.ts';

const blockMapping = (levels: number): string => Array.from({ length: levels }, (_, i) => `${' '.repeat(i)}a:`).join('\n') + ' 1\n';

describe('yamlNestingExceeds', () => {
  test.each([
    ['flow mappings', (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)],
    ['flow sequences', (n: number) => '['.repeat(n) + ']'.repeat(n)],
    ['compact block sequences', (n: number) => '- '.repeat(n) + 'x\n'],
    ['complex keys', (n: number) => '? '.repeat(n) + 'x\n'],
    ['block mappings by indentation', blockMapping],
    ['a mix', (n: number) => `${'- '.repeat(n / 4)}${'{"a":'.repeat(n / 4)}\n${blockMapping(n / 2)}`],
  ])('%s: below the limit passes, twice as deep does not, and thousands are refused at once', (_kind, make) => {
    // An estimate from above: the line a collection starts on may count as one more level.
    expect(yamlNestingExceeds(make(7), 8)).toBe(false);
    expect(yamlNestingExceeds(make(16), 8)).toBe(true);
    expect(yamlNestingExceeds(make(4000), MAX_NESTING)).toBe(true);
  });

  test('siblings and closed collections do not add up; comments and indentation alone are not levels', () => {
    const wide = Array.from({ length: 500 }, (_, i) => `k${i}: {a: [1, 2, {b: c}]}`).join('\n');
    expect(yamlNestingExceeds(wide, 4)).toBe(false);
    expect(yamlNestingExceeds(`a:\n${' '.repeat(200)}b: 1\n${' '.repeat(300)}# a comment far in\n`, 4)).toBe(false);
  });
});

describe('apply documents', () => {
  test('a document nested deeper than the limit is a clear error, not a parse', () => {
    const deep = '{"a":'.repeat(3000) + '1' + '}'.repeat(3000);
    expect(() => parseProxyDocuments(deep)).toThrow(InvalidProxyDocumentsError);
    expect(() => parseProxyDocuments(deep)).toThrow(`the YAML nests collections deeper than ${MAX_NESTING} levels`);
  });

  test('an ordinary Proxy document (a few levels) still parses', () => {
    const docs = parseProxyDocuments(
      'apiVersion: egress-proxies/v1\nkind: Proxy\nmetadata:\n  name: web\n  labels:\n    team: crawl\nspec:\n  provider: local\n',
    );
    expect(docs.map((d) => d.metadata.name)).toEqual(['web']);
  });
});
