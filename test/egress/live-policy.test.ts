/**
 * The policy a running proxy keeps current from its file (src/egress/live-policy.ts): a file that
 * appears or changes at any moment after a read is picked up, including one written while the
 * first read was failing (the gcp policy sync racing the proxy's start, which left a booted proxy
 * on the default deny until the policy next changed).
 */
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { startLivePolicy, type LivePolicy } from '../../src/egress/live-policy.ts';
import { createLogger } from '../../src/logging.ts';
import { tempDir } from '../support/temp-dirs.ts';

const ALLOW_LOOPBACK = JSON.stringify(proxyEgressPolicy({ allow: ['127.0.0.0/8'], deny: [] }, undefined));
const DEFAULT_DENY = JSON.stringify(proxyEgressPolicy(undefined, undefined));

/** A logger whose messages can be awaited by count. */
function recordingLogger() {
  const messages: string[] = [];
  const waiters: { msg: string; n: number; resolve: () => void }[] = [];
  const count = (msg: string) => messages.filter((m) => m === msg).length;
  const logger = createLogger({
    level: 'info',
    destination: new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) messages.push((JSON.parse(line) as { msg: string }).msg);
        for (const w of [...waiters]) {
          if (count(w.msg) < w.n) continue;
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
        done();
      },
    }),
  });
  const seen = (msg: string, n = 1): Promise<void> => (count(msg) >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ msg, n, resolve })));
  const loaded = (n: number): Promise<void> => seen('egress policy loaded', n);
  return { logger, messages, seen, loaded };
}

let live: LivePolicy | undefined;
afterEach(() => live?.close());

describe('startLivePolicy with a file', () => {
  it('loads a file written while its first read was failing', async () => {
    const file = join(await tempDir('egress-live-policy-'), 'policy.json');
    const { logger, messages, loaded } = recordingLogger();
    let reads = 0;
    live = await startLivePolicy({
      file,
      logger,
      watchMs: 20,
      // The first read fails as the file is absent; the file appears just after, before anything
      // else happens (what a watcher started after the first read would take as its baseline).
      readText: async (path) => {
        reads++;
        if (reads === 1) {
          const failed = await readFile(path, 'utf8').then(
            () => new Error('the file was expected to be absent'),
            (err: unknown) => err as Error,
          );
          await writeFile(path, ALLOW_LOOPBACK);
          throw failed;
        }
        return readFile(path, 'utf8');
      },
    });
    expect(live.loaded).toBe(false);
    expect(messages).toContain('egress policy unreadable; default deny only');
    expect(live.current().judge('127.0.0.1', 80).allowed).toBe(false);

    await loaded(1);
    expect(live.loaded).toBe(true);
    expect(live.current().judge('127.0.0.1', 80)).toEqual({ allowed: true, reason: 'allowed-range' });
  });

  it('follows a file replaced by rename, keeps the last good document through an invalid one', async () => {
    const dir = await tempDir('egress-live-policy-');
    const file = join(dir, 'policy.json');
    await writeFile(file, ALLOW_LOOPBACK);
    const { logger, seen, loaded } = recordingLogger();
    live = await startLivePolicy({ file, logger, watchMs: 20 });
    await loaded(1);
    const first = live.generation;
    expect(live.current().judge('127.0.0.1', 80).allowed).toBe(true);

    await writeFile(join(dir, 'next.tmp'), DEFAULT_DENY);
    await rename(join(dir, 'next.tmp'), file);
    await loaded(2);
    expect(live.generation).toBeGreaterThan(first);
    expect(live.current().judge('127.0.0.1', 80)).toEqual({ allowed: false, reason: 'loopback' });

    await writeFile(file, '{"version": 1, "allow": "not a list"}');
    await seen('egress policy invalid; keeping the last one');
    expect(live.current().judge('127.0.0.1', 80).allowed).toBe(false);

    await writeFile(file, ALLOW_LOOPBACK);
    await loaded(3);
    expect(live.current().judge('127.0.0.1', 80).allowed).toBe(true);
  });
});
