/** The `--pick-*` and `--feedback-*` flags: defaults, ranges, and errors that name the flag. */
import { describe, expect, test } from 'vitest';
import { buildServerConfig, SERVER_FLAG_DEFAULTS, type ServerFlags } from '../../src/cli/server-config.ts';
import { DEFAULT_PICK_SETTINGS } from '../../src/config/app.ts';
import { runCli } from '../support/cli.ts';

function flags(extra: Partial<ServerFlags>): ServerFlags {
  return { ...SERVER_FLAG_DEFAULTS, redisUrl: 'redis://127.0.0.1:1', ...extra };
}

describe('pick and feedback flags', () => {
  test('defaults equal DEFAULT_PICK_SETTINGS; each flag sets its field', async () => {
    expect((await buildServerConfig(flags({}), { defaultProviders: false, servesApi: true })).picks).toEqual(DEFAULT_PICK_SETTINGS);
    const set = await buildServerConfig(
      flags({
        pickSessionTtl: '2h',
        pickCache: '0',
        feedbackBlockCooldown: '90s',
        feedbackReplaceDomains: '5',
        feedbackReplaceWindow: '1h',
        feedbackRate: '0.5',
        feedbackBurst: '7',
      }),
      { defaultProviders: false, servesApi: true },
    );
    expect(set.picks).toEqual({
      sessionTtlMs: 7_200_000,
      memberCacheMs: 0,
      blockCooldownMs: 90_000,
      replaceDomains: 5,
      replaceWindowMs: 3_600_000,
      feedbackRate: 0.5,
      feedbackBurst: 7,
    });
  });

  test.each([
    [{ pickSessionTtl: '5s' }, '--pick-session-ttl: expected a duration from 10s to 168h such as 30m, got "5s"'],
    [{ pickSessionTtl: 'soon' }, '--pick-session-ttl: expected a duration from 10s to 168h such as 30m, got "soon"'],
    [{ pickCache: '11s' }, '--pick-cache: expected a duration from 0 to 10s such as 1s, got "11s"'],
    [{ feedbackBlockCooldown: '0' }, '--feedback-block-cooldown: expected a duration from 1s to 168h such as 30m, got "0"'],
    [{ feedbackReplaceDomains: '0' }, '--feedback-replace-domains: expected an integer from 1 to 1000, got "0"'],
    [{ feedbackReplaceWindow: '200h' }, '--feedback-replace-window: expected a duration from 1s to 168h such as 10m, got "200h"'],
    [{ feedbackRate: '0' }, '--feedback-rate: expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got "0"'],
    [{ feedbackRate: 'fast' }, '--feedback-rate: expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got "fast"'],
    [{ feedbackBurst: '1.5' }, '--feedback-burst: expected an integer from 1 to 100000, got "1.5"'],
  ])('%j is refused naming the flag', async (extra, message) => {
    await expect(buildServerConfig(flags(extra), { defaultProviders: false, servesApi: true })).rejects.toThrow(message);
  });

  test('`egress api` takes the flags and refuses a bad one with exit 2', async () => {
    const run = await runCli(['api', '--pick-session-ttl', '1s', '--check-config'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(run).toMatchObject({ code: 2, err: 'error: --pick-session-ttl: expected a duration from 10s to 168h such as 30m, got "1s"\n' });
  });
});
