import { describe, expect, test } from 'vitest';
import { buildServerConfig, SERVER_FLAG_DEFAULTS } from '../../src/cli/server-config.ts';
import { gcDeletesPerSecond } from '../../src/config/app.ts';
import { parseConfigDocument } from '../../src/config/file.ts';

// The GC delete rate: `--gc-deletes-per-second` for every provider, a provider's own
// `gc.deletesPerSecond` over it; both validated with messages naming the flag or the field.
describe('GC delete rate', () => {
  const build = (gcDeletesPerSecond: string) =>
    buildServerConfig({ ...SERVER_FLAG_DEFAULTS, gcDeletesPerSecond }, { defaultProviders: false, servesApi: false });
  const file = (gc: unknown) => parseConfigDocument({ providers: [{ name: 'gce', type: 'gcp', project: 'p', gc }] }, 'egress.yaml');

  test('defaults to 5 per second; fractions are allowed', async () => {
    expect((await buildServerConfig({ ...SERVER_FLAG_DEFAULTS }, { defaultProviders: false, servesApi: false })).gcDeletesPerSecond).toBe(5);
    expect((await build('0.5')).gcDeletesPerSecond).toBe(0.5);
  });

  test.each(['0', '-2', 'fast', '', '1001', 'Infinity'])('--gc-deletes-per-second %j is refused, naming the flag', async (value) => {
    await expect(build(value)).rejects.toThrow(
      `--gc-deletes-per-second: expected a number of deletions per second above 0 and at most 1000 (such as 5 or 0.5), got "${value}"`,
    );
  });

  test.each([
    [0, 'egress.yaml: providers[0].gc.deletesPerSecond: expected more than 0, got 0'],
    ['fast', 'egress.yaml: providers[0].gc.deletesPerSecond: expected a number, got "fast"'],
    [5000, 'egress.yaml: providers[0].gc.deletesPerSecond: expected at most 1000, got 5000'],
  ])('gc.deletesPerSecond %j is refused, naming the field', (value, message) => {
    expect(() => file({ deletesPerSecond: value })).toThrow(message);
  });

  test("a provider's gc.deletesPerSecond overrides the flag; the others take the flag", async () => {
    const base = await build('7');
    const providers = [...file({ deletesPerSecond: 2 }).providers, { name: 'local', type: 'local' as const }];
    const config = { ...base, providers };
    expect(gcDeletesPerSecond(config, 'gce')).toBe(2);
    expect(gcDeletesPerSecond(config, 'local')).toBe(7);
    expect(() => file({ rate: 3 })).toThrow('egress.yaml: providers[0].gc: unknown key "rate"');
  });
});
