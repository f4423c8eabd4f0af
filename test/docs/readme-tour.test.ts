/**
 * The README's five-minute tour, run as a reader runs it: every command of its `sh` blocks, parsed
 * from the README (so the two cannot drift), in a directory of the test's own with `egress up`
 * started there on a free port (the tour must not need 8080). `npx egress` is the package's
 * bin/egress.js, curl the real one. Each command must exit 0 and show what the README says: the
 * output lines printed under it, the output its comment shows, and what a reader looks for (a
 * Ready proxy, a 200 through it). A command whose answer comes with time (a proxy turning Ready,
 * a pool filling) is run again until it does, as a reader would. The tour ends with `egress down`,
 * after which nothing of the directory may run.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { down } from '../../src/cli/commands/down-command.ts';
import { isAlive } from '../../src/redis/process-info.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import { packageVersion } from '../../src/version.ts';
import { EGRESS_BIN, ROOT } from '../support/cli.ts';
import { processesUnder } from '../support/processes-under.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);

interface Step {
  command: string;
  /** The README's comment after the command, if any. */
  comment: string;
  /** Lines the README prints under the command: its output. */
  output: string[];
}

/** The `sh` blocks of the README section `## A five-minute tour`, as steps. */
function tourSteps(readme: string): Step[] {
  const start = readme.indexOf('## A five-minute tour');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end);
  const steps: Step[] = [];
  for (const block of section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    for (const line of (block[1] ?? '').split('\n')) {
      if (line.trim() === '') continue;
      if (/^(npm|npx|curl|printf|export) /.test(line)) {
        // A comment is `  # …` after the command (a `#` inside quotes or a URL is not one).
        const at = line.search(/\s{2,}# /);
        steps.push({ command: at < 0 ? line : line.slice(0, at).trimEnd(), comment: at < 0 ? '' : line.slice(at).replace(/^\s+# /, ''), output: [] });
      } else {
        steps.at(-1)?.output.push(line);
      }
    }
  }
  return steps;
}

/** A README output line against a real one: every word but durations and ages (`12s`, `0.004s`) as shown. */
function wordsMatch(documented: string, actual: string): boolean {
  const words = (text: string): string[] => text.trim().split(/\s+/);
  const real = words(actual);
  return words(documented).every((word, i) => /^\d+(\.\d+)?(ms|s|m|h)$/.test(word) || real[i] === word);
}

/**
 * A comment that shows output as a check: a URL (`…` any text, PORT or the default 8080 a port)
 * starts a line of the output; a JSON value is the output. Other comments describe, not show.
 */
function shownOutput(comment: string): ((out: string) => boolean) | undefined {
  const shown = comment.split(/\s/)[0]?.replace(/[,;]$/, '') ?? '';
  if (/^https?:\/\//.test(shown)) {
    const pattern = new RegExp(
      `^${shown
        .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
        .replace(/…/g, '.+')
        .replace(/PORT|8080/g, '\\d+')}`,
      'm',
    );
    return (out) => pattern.test(out);
  }
  let json: unknown;
  try {
    json = JSON.parse(shown);
  } catch {
    return undefined;
  }
  return (out) => {
    try {
      return JSON.stringify(JSON.parse(out)) === JSON.stringify(json);
    } catch {
      return false;
    }
  };
}

describe("README's five-minute tour, run", () => {
  let home: string;
  let dataDir: string;
  let steps: Step[];
  const env: Record<string, string> = {};
  let up: ReturnType<typeof spawn> | undefined;
  let upExited: Promise<unknown> = Promise.resolve();
  let upLog = '';

  beforeAll(async () => {
    steps = tourSteps(await readFile(join(ROOT, 'README.md'), 'utf8'));
    home = await tempDir('egress-tour-');
    dataDir = join(home, '.egress');
    // `npx egress …` is this package's binary, as npx resolves it in a checkout.
    const bin = join(home, 'bin');
    await mkdir(bin);
    await writeFile(
      join(bin, 'npx'),
      `#!/bin/sh\nif [ "$1" = egress ]; then shift; exec "${process.execPath}" "${EGRESS_BIN}" "$@"; fi\necho "npx: this test runs only egress" >&2; exit 127\n`,
    );
    await chmod(join(bin, 'npx'), 0o755);
    Object.assign(env, {
      PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      HOME: home,
      TMPDIR: process.env.TMPDIR ?? home,
      EGRESS_FROM_SOURCE: '1',
    });
  });
  afterAll(async () => {
    if (up && up.exitCode === null && up.signalCode === null) up.kill('SIGTERM');
    await upExited;
    await down(dataDir, { out: () => undefined, err: () => undefined }).catch(() => undefined);
  });

  /** `npm start` of the tour: `egress up` in the tour's directory, on a free port (the README says `-- --port N` works). */
  async function start(step: Step): Promise<void> {
    expect(step.comment).toMatch(/^= egress up/);
    const port = await freePort();
    up = spawn(process.execPath, [EGRESS_BIN, 'up', '--port', String(port)], { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
    up.stdout?.on('data', (c: Buffer) => (upLog += c.toString()));
    up.stderr?.on('data', (c: Buffer) => (upLog += c.toString()));
    upExited = once(up, 'exit');
    await waitFor(
      'egress up to say it is up',
      () => upLog.includes('egress is up') || (up?.exitCode !== null ? Promise.reject(new Error(upLog)) : false),
      60_000,
    );
    expect(upLog).toContain(`egress is up: API http://127.0.0.1:${port}, Bull Board http://127.0.0.1:${port}/admin/queues`);
    expect(upLog).toContain(`data directory: ${dataDir} (\`npx egress …\` run in ${home} finds this API by itself`);
  }

  /** What a reader looks for in a command's output, beyond the lines the README prints under it. */
  function expectations(step: Step): ((out: string) => boolean)[] {
    const checks: ((out: string) => boolean)[] = [];
    const shown = shownOutput(step.comment);
    if (shown) checks.push(shown);
    if (step.output.length > 0) {
      checks.push((out) => {
        const lines = out.split('\n');
        // The header line as printed; each row somewhere below it.
        return wordsMatch(step.output[0] ?? '', lines[0] ?? '') && step.output.slice(1).every((row) => lines.slice(1).some((line) => wordsMatch(row, line)));
      });
    }
    const c = step.command;
    if (c.startsWith('npx egress get ph -o json')) checks.push((out) => Array.isArray((JSON.parse(out) as { items?: unknown }).items));
    if (c.startsWith('npx egress get proxies')) checks.push((out) => /^web-1\s+local\s+Ready\s/m.test(out));
    if (c.startsWith('npx egress get pools')) {
      const header = step.comment.split(/\s+/);
      checks.push((out) => wordsMatch(header.join(' '), out.split('\n')[0] ?? '') && /^search\s+3\s+3\s+0\s+0\s/m.test(out));
    }
    if (c.startsWith('npx egress describe proxy web-1'))
      checks.push((out) => /^Name:\s+web-1$/m.test(out) && /^ {2}Phase:\s+Ready$/m.test(out) && /^ {2}Observed Generation: +1$/m.test(out));
    if (c.startsWith('npx egress delete proxy web-1')) checks.push((out) => out.includes('web-1'));
    if (c.includes('/pick?')) checks.push((out) => /^http:\/\/egress-search-[^:]+:[^@]+@127\.0\.0\.1:\d+\n?$/.test(out));
    if (c.startsWith('npx egress rotate pool search')) checks.push((out) => out.startsWith('proxypool/search rotation requested'));
    if (c.startsWith('npx egress --version')) checks.push((out) => out.trim() === packageVersion());
    if (c.startsWith('npx egress down'))
      checks.push((out) =>
        new RegExp(`^stopped egress \\(pid ${up?.pid ?? 0}\\), the local proxy host \\(pid \\d+.*\\) and its proxies of ${dataDir}\\n$`).test(out),
      );
    return checks;
  }

  /** Runs one command as bash runs it in the tour's directory, again until its output is what the README says. */
  async function runStep(step: Step): Promise<void> {
    const assign = /^export ([A-Z_]+)=/.exec(step.command)?.[1];
    const script = assign ? `${step.command}; printf '%s' "$${assign}"` : step.command;
    const checks = expectations(step);
    let last = '';
    await waitFor(
      `\`${step.command}\` to show what the README says`,
      async () => {
        const result = await run('bash', ['-o', 'pipefail', '-c', script], { cwd: home, env }).catch(
          (err: { code?: number; stdout?: string; stderr?: string }) => {
            last = `exit ${String(err.code)}\n${err.stdout ?? ''}${err.stderr ?? ''}`;
            return undefined;
          },
        );
        if (!result) return false;
        last = result.stdout + result.stderr;
        return checks.every((check) => check(result.stdout)) ? result : false;
      },
      60_000,
      250,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; its last output:\n${last}\negress up's log:\n${upLog.slice(-2000)}`);
    });
    if (assign) {
      const { stdout } = await run('bash', ['-c', script], { cwd: home, env });
      env[assign] = stdout;
    }
  }

  test('every command of the tour exits 0 and shows what the README says; egress down leaves nothing of the data directory running', async () => {
    expect(steps[0]?.command).toBe('npm start');
    expect(steps.at(-1)?.command).toBe('npx egress down');
    expect(steps.length).toBeGreaterThan(15);
    let hostPid: number | undefined;
    let redisPid: number | undefined;
    for (const step of steps) {
      if (step.command === 'npm start') {
        await start(step);
        continue;
      }
      if (step.command === 'npx egress down') {
        redisPid = (JSON.parse(await readFile(join(dataDir, 'redis/server.json'), 'utf8')) as { pid: number }).pid;
        hostPid = (JSON.parse(await readFile(join(dataDir, 'local/local/host/host.json'), 'utf8')) as { pid: number }).pid;
        expect(isAlive(redisPid) && isAlive(hostPid)).toBe(true);
      }
      await runStep(step);
    }
    expect(env.EGRESS_API_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await upExited;
    expect(up?.exitCode).toBe(0);
    expect(redisPid !== undefined && isAlive(redisPid)).toBe(false);
    expect(hostPid !== undefined && isAlive(hostPid)).toBe(false);
    expect(await processesUnder(home)).toEqual([]);
  }, 300_000);
});
