import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { down } from '../../src/cli/commands/down-command.ts';
import { createLogger } from '../../src/logging.ts';
import { prettyLine, resolveLogFormat } from '../../src/pretty-log.ts';
import { SecretRegistry } from '../../src/secrets/secret-registry.ts';
import { EGRESS_BIN, ROOT, runCli } from '../support/cli.ts';
import { processesUnder } from '../support/processes-under.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const SECRET = 'pretty-secret-0123456789abcdef';

/** A logger whose lines, as written, are collected. */
function captured(format: 'pretty' | 'json'): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const secrets = new SecretRegistry();
  secrets.set('test', [SECRET]);
  const logger = createLogger({ level: 'info', secrets, format, destination: { write: (text: string) => void lines.push(text) } });
  return { lines, logger };
}

describe('pretty logs', () => {
  it('one line of text per entry: time, level, where from, message, then the other fields', () => {
    const line = prettyLine(
      JSON.stringify({
        level: 40,
        time: Date.UTC(2026, 0, 1, 12, 4, 31),
        pid: 1,
        role: 'worker',
        msg: 'probe failed',
        proxy: 'web-1',
        err: 'timed out after 2s',
      }),
    );
    expect(line).toMatch(/^\d\d:\d\d:\d\d WARN {2}worker: probe failed {2}proxy=web-1 err="timed out after 2s"\n$/);
    expect(prettyLine('not json')).toBe('not json\n');
  });

  it('passes the secret registry first: a secret in a message or a field is redacted as in JSON', () => {
    for (const format of ['pretty', 'json'] as const) {
      const { lines, logger } = captured(format);
      logger.warn({ detail: `the peer said ${SECRET}`, password: 'hunter2-hunter2' }, `login with ${SECRET} failed`);
      const text = lines.join('');
      expect(text, format).not.toContain(SECRET);
      expect(text, format).not.toContain('hunter2');
      expect(text, format).toContain('[redacted]');
      if (format === 'pretty')
        expect(text).toMatch(/^\d\d:\d\d:\d\d WARN {2}login with \[redacted\] failed {2}detail="the peer said \[redacted\]" password=\[redacted\]\n$/);
    }
  });

  it('auto is pretty on a terminal, JSON otherwise', () => {
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });

  it('a bad --log-format exits 2 naming the flag and the values', async () => {
    const run = await runCli(['up', '--log-format', 'fancy', '--data-dir', await tempDir('egress-logfmt-')]);
    expect(run.code).toBe(2);
    expect(run.err).toContain('--log-format: expected one of auto, pretty, json, got "fancy"');
  });
});

/** An ANSI colour code: ESC [ … m. */
const COLOUR_CODE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

/** `egress up ARGS` under `script`, which gives it a terminal: standard error is a TTY, as in a user's shell. */
function upOnTerminal(args: string, env: Record<string, string | undefined>): { output: () => string; exited: Promise<unknown> } {
  const child = spawn('script', ['-qec', `${process.execPath} ${EGRESS_BIN} up ${args}`, '/dev/null'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  // Without the colour codes a colour terminal gets around the level names.
  return { output: () => out.replace(COLOUR_CODE, ''), exited: once(child, 'exit') };
}

async function apiPid(dataDir: string): Promise<number> {
  return (JSON.parse(await readFile(join(dataDir, 'api.json'), 'utf8')) as { pid: number }).pid;
}

describe('egress up on a terminal', () => {
  let dataDir = '';
  afterAll(async () => {
    if (dataDir) await down(dataDir, { out: () => undefined, err: () => undefined });
  });

  it('is quiet and readable, says where things are, and on Ctrl-C how many local proxies keep serving and how to stop them', async () => {
    dataDir = await tempDir('egress-tty-');
    const env: Record<string, string | undefined> = { ...process.env };
    delete env.EGRESS_LOG_LEVEL;
    const up = upOnTerminal(`--port 0 --data-dir ${dataDir}`, env);
    await waitFor('the banner', () => up.output().includes('stop: Ctrl-C'), 60_000);
    const out = (): string => up.output();
    const apiUrl = /egress is up: API (\S+),/.exec(out())?.[1] ?? '';
    expect(out()).toContain(`Bull Board ${apiUrl}/admin/queues, metrics ${apiUrl}/metrics`);
    expect(out()).toContain(`data directory: ${dataDir} (\`npx egress …\` finds this API with export EGRESS_DATA_DIR=${dataDir}`);
    expect(out()).toContain(`for curl: export EGRESS_API_URL=${apiUrl}`);
    expect(out()).toContain(`\`npx egress down --data-dir ${dataDir}\``);

    const cli = (...args: string[]) => runCli([...args, '--data-dir', dataDir]);
    const proxy = 'kind: Proxy\nmetadata: { name: tty-1 }\nspec: { provider: local }\n';
    await writeFile(join(dataDir, 'tty-1.yaml'), proxy);
    expect((await cli('apply', '-f', join(dataDir, 'tty-1.yaml'))).code).toBe(0);
    await waitFor('tty-1 Ready', async () => /tty-1\s+local\s+Ready/.test((await cli('get', 'proxies')).out), 60_000);
    // Routine info lines (roles starting, each reconcile and probe) are not shown; nothing is JSON.
    expect(out()).not.toMatch(/^\{"level"/m);
    expect(out()).not.toMatch(/ INFO /);

    const pid = (JSON.parse(await readFile(join(dataDir, 'api.json'), 'utf8')) as { pid: number }).pid;
    process.kill(pid, 'SIGINT');
    await up.exited;
    expect(out()).toContain('egress: shutting down (SIGINT) …');
    expect(out()).toContain(
      `egress stopped; 1 local proxy keeps serving (the next start adopts them): \`npx egress down --data-dir ${dataDir}\` stops everything`,
    );
    expect((await processesUnder(dataDir)).map((p) => p.command).join('\n')).toContain('proxy-host');

    const stopped = await cli('down');
    expect(stopped.code).toBe(0);
    expect(stopped.out).toMatch(new RegExp(`^stopped the local proxy host \\(pid \\d+(, with \\d+ relays?)?\\) and its proxies of ${dataDir}\\n$`));
    expect(await processesUnder(dataDir)).toEqual([]);
  });

  it('shows the routine lines when --log-level asks, and JSON lines with --log-format json', async () => {
    const env: Record<string, string | undefined> = { ...process.env };
    delete env.EGRESS_LOG_LEVEL;
    for (const [args, expected] of [
      ['--log-level info', /^\d\d:\d\d:\d\d INFO {2}api: api listening {2}url=http:\/\/127\.0\.0\.1:\d+/m],
      ['--log-format json', /^\{"level":30,.*"msg":"api listening"\}\r?$/m],
    ] as const) {
      const dir = await tempDir('egress-tty-level-');
      const up = upOnTerminal(`--port 0 --data-dir ${dir} ${args}`, env);
      try {
        await waitFor('the banner', () => up.output().includes('stop: Ctrl-C'), 60_000);
        expect(up.output(), args).toMatch(expected);
      } finally {
        process.kill(await apiPid(dir), 'SIGTERM');
        await up.exited;
      }
    }
  });
});
