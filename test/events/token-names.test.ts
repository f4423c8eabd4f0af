/**
 * Named API tokens (`name:token` lines of --api-token-file) and the index a plain line is shown
 * by, as the config parser reads them; and the events' retention flags, validated like the others.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { buildServerConfig, SERVER_FLAG_DEFAULTS, type ServerFlags } from '../../src/cli/server-config.ts';
import { runCli } from '../support/cli.ts';
import { tempDir } from '../support/temp-dirs.ts';

async function tokenFile(text: string): Promise<string> {
  const file = join(await tempDir('egress-event-tokens-'), 'tokens');
  await writeFile(file, text, { mode: 0o600 });
  return file;
}

function flags(extra: Partial<ServerFlags>): ServerFlags {
  return { ...SERVER_FLAG_DEFAULTS, redisUrl: 'redis://127.0.0.1:1', ...extra };
}

describe('named tokens', () => {
  test('name:token lines are named, plain lines keep working and are shown by their position', async () => {
    const file = await tokenFile('# ops\nci:ci-token-0123456789abcdef\nplain-token-0123456789abcdef\n\nops.team-1:ops-token-0123456789abcd\n');
    const config = await buildServerConfig(flags({ apiTokenFile: file }), { defaultProviders: false, servesApi: true });
    expect(config.api.tokens).toEqual(['ci-token-0123456789abcdef', 'plain-token-0123456789abcdef', 'ops-token-0123456789abcd']);
    expect(config.api.tokenNames).toEqual(['ci', '#2', 'ops.team-1']);
  });

  test('a file of plain tokens only reads as before', async () => {
    const file = await tokenFile('first-token-0123456789abcdef\nsecond-token-0123456789abcdef\n');
    const config = await buildServerConfig(flags({ apiTokenFile: file }), { defaultProviders: false, servesApi: true });
    expect(config.api.tokens).toEqual(['first-token-0123456789abcdef', 'second-token-0123456789abcdef']);
    expect(config.api.tokenNames).toEqual(['#1', '#2']);
  });

  test('two tokens with one name, or a named token too short, are refused naming the flag (exit 2)', async () => {
    const dup = await tokenFile('ci:ci-token-0123456789abcdef\nci:other-token-0123456789abc\n');
    const run = await runCli(['api', '--api-token-file', dup, '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(run.code).toBe(2);
    expect(run.err).toBe(`error: --api-token-file: ${dup} names two tokens "ci": names must be unique\n`);
    const short = await tokenFile('ci:short\n');
    const shortRun = await runCli(['api', '--api-token-file', short, '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(shortRun.code).toBe(2);
    expect(shortRun.err).toContain('--api-token-file: every token in');
    // The message names the token by its name, never shows it.
    expect(shortRun.err).toContain('token ci is shorter');
    expect(shortRun.err).not.toContain('ci:short');
  });
});

describe('event retention flags', () => {
  test('defaults: 10000 events, 24 hours', async () => {
    const config = await buildServerConfig(flags({}), { defaultProviders: false, servesApi: true });
    expect(config.events).toEqual({ maxCount: 10_000, maxAgeMs: 86_400_000 });
    const set = await buildServerConfig(flags({ eventsMaxCount: '500', eventsMaxAge: '2h' }), { defaultProviders: false, servesApi: false });
    expect(set.events).toEqual({ maxCount: 500, maxAgeMs: 7_200_000 });
  });

  test.each([
    [['--events-max-count', '10'], '--events-max-count: expected an integer from 100 to 1000000, got "10"'],
    [['--events-max-count', 'lots'], '--events-max-count: expected an integer from 100 to 1000000, got "lots"'],
    [['--events-max-age', '10s'], '--events-max-age: expected a duration from 1m to 2160h (90 days) such as 24h, got "10s"'],
    [['--events-max-age', '3000h'], '--events-max-age: expected a duration from 1m to 2160h (90 days) such as 24h, got "3000h"'],
    [['--events-max-age', 'forever'], '--events-max-age: expected a positive duration such as 30s, got "forever"'],
  ])('%j is refused with exit 2', async (args, message) => {
    for (const role of ['worker', 'publisher', 'scheduler', 'api']) {
      const run = await runCli([role, ...args, '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' });
      expect(run, role).toMatchObject({ code: 2, err: `error: ${message}\n` });
    }
  });
});
