/**
 * Suites that need a program of the machine (kubectl, promtool) declare it here instead of
 * skipping on their own. Where the program is missing:
 * - under CI (`CI=true`, as `.ci/run` runs) the suite fails, with one test naming the program and
 *   how to install it, so a CI machine that lacks it can never pass by running less;
 * - elsewhere the suite is skipped visibly: its name says what is missing, and a line on stderr
 *   says how to install it.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, it, type TestOptions } from 'vitest';

const run = promisify(execFile);

export interface RequiredTool {
  /** The command looked up on PATH. */
  command: string;
  /** Arguments of a call that succeeds only when the program works. */
  probe: string[];
  /** How a machine gets it. */
  install: string;
}

export const TOOLS = {
  kubectl: {
    command: 'kubectl',
    probe: ['version', '--client'],
    install: 'bash scripts/install-kubectl.sh (as .ci/run does; needs kubectl ≥ 1.27)',
  },
  promtool: {
    command: 'promtool',
    probe: ['--version'],
    install: 'apt-get install prometheus (as .ci/run does)',
  },
  // The vendors' proxies of the upstream provider's suites (test/providers/upstream-*.test.ts).
  tinyproxy: { command: 'tinyproxy', probe: ['-v'], install: 'apt-get install tinyproxy (as .ci/run does)' },
  squid: { command: 'squid', probe: ['-v'], install: 'apt-get install squid (as .ci/run does)' },
  danted: { command: 'danted', probe: ['-v'], install: 'apt-get install dante-server (as .ci/run does)' },
  // The console's browser suite drives Debian's Chromium through playwright-core (test/console/).
  chromium: {
    command: 'chromium',
    probe: ['--version'],
    install: 'apt-get install chromium (as .ci/run does)',
  },
} as const satisfies Record<string, RequiredTool>;

export type ToolName = keyof typeof TOOLS;

/** A required program that is not on this machine. */
export class MissingToolError extends Error {
  readonly code = 'ERR_TEST_TOOL_MISSING';
  constructor(
    readonly tool: ToolName,
    cause?: unknown,
  ) {
    super(`${TOOLS[tool].command} is required by this suite and is not installed: ${TOOLS[tool].install}`, { cause });
    this.name = 'MissingToolError';
  }
}

const probes = new Map<ToolName, Promise<unknown>>();

/** Resolves to undefined when the tool works, or to the error of its probe. */
function probe(tool: ToolName): Promise<unknown> {
  let p = probes.get(tool);
  if (!p) {
    p = run(TOOLS[tool].command, [...TOOLS[tool].probe], { timeout: 30_000 }).then(
      () => undefined,
      (err: unknown) => err ?? new Error('probe failed'),
    );
    probes.set(tool, p);
  }
  return p;
}

/** Whether the tool works on this machine (probed once per test file). */
export async function hasTool(tool: ToolName): Promise<boolean> {
  return (await probe(tool)) === undefined;
}

const onCi = process.env.CI === 'true';

/** Availability of every tool, probed at import so that suites can be declared synchronously. */
const available = new Map<ToolName, unknown>(await Promise.all((Object.keys(TOOLS) as ToolName[]).map(async (t) => [t, await probe(t)] as const)));

/** What `describeWithTool` does for a tool: run the suite, fail it (CI) or skip it (elsewhere). */
export function verdictOf(present: boolean, ci: boolean): 'run' | 'fail' | 'skip' {
  if (present) return 'run';
  return ci ? 'fail' : 'skip';
}

/**
 * `describe(name, options, fn)` for a suite that needs `tool`. Missing under CI: the suite is one
 * failing test carrying a MissingToolError. Missing elsewhere: a skipped suite whose name says why.
 */
export function describeWithTool(tool: ToolName, name: string, options: TestOptions, fn: () => void): void;
export function describeWithTool(tool: ToolName, name: string, fn: () => void): void;
export function describeWithTool(tool: ToolName, name: string, a: TestOptions | (() => void), b?: () => void): void {
  const options = typeof a === 'function' ? {} : a;
  const body = typeof a === 'function' ? a : b;
  if (!body) throw new TypeError('describeWithTool needs a suite body');
  const verdict = verdictOf(available.get(tool) === undefined, onCi);
  if (verdict === 'run') {
    describe(name, options, body);
    return;
  }
  const error = new MissingToolError(tool, available.get(tool));
  if (verdict === 'fail') {
    describe(name, () => {
      it(`needs ${TOOLS[tool].command}`, () => {
        throw error;
      });
    });
    return;
  }
  process.stderr.write(`skipping "${name}": ${error.message}\n`);
  describe.skip(`${name} [skipped: ${TOOLS[tool].command} is not installed]`, options, body);
}
