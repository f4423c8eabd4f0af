/**
 * A private podman for one test file: `scripts/container-stand-ins.sh up DIR` installs podman & co.
 * when missing, writes a configuration whose image store, run state, networks and temp space are under
 * DIR, and loads the stand-in base images (built once, cached outside the repository). Every podman
 * command the test runs gets that environment; `down()` removes what podman made, on the host too.
 */
import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SCRIPT = fileURLToPath(new URL('../../../scripts/container-stand-ins.sh', import.meta.url));

export interface CommandResult {
  stdout: string;
  stderr: string;
}

export class CommandFailed extends Error {
  constructor(
    readonly command: string,
    readonly code: number | null,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(`${command} exited ${code}: ${(stderr || stdout).trim().slice(-2000)}`);
  }
}

/** Runs a command to its end; rejects with CommandFailed (its output attached) on a non-zero exit. */
export function run(file: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, [...args], { cwd: options.cwd, env: options.env, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new CommandFailed(`${file} ${args.join(' ')}`, typeof err.code === 'number' ? err.code : null, stdout, stderr));
      else resolve({ stdout, stderr });
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

export interface Podman {
  /** The environment every podman command of this store runs with (the process's, plus the store's). */
  readonly env: NodeJS.ProcessEnv;
  podman(args: readonly string[], options?: { cwd?: string; input?: string }): Promise<CommandResult>;
  /** Runs any command (podman-compose, sh) with the store's environment. */
  exec(file: string, args: readonly string[], options?: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string }): Promise<CommandResult>;
  /** Resolves when a line of the container's log matches; the log is followed, not polled. */
  waitForLog(container: string, pattern: RegExp): Promise<string>;
  down(): Promise<void>;
}

/**
 * `container-stand-ins.sh down DIR`: what a store in DIR made is removed, on the host too. Safe to call
 * when `privatePodman(DIR)` failed half-way or never ran, and more than once.
 */
export async function podmanDown(dir: string): Promise<void> {
  await run('bash', [SCRIPT, 'down', dir]);
}

export async function privatePodman(dir: string): Promise<Podman> {
  const niced = (args: readonly string[]): string[] => ['-n', '10', ...args];
  await run('nice', niced(['bash', SCRIPT, 'up', dir]));
  const { stdout } = await run('bash', [SCRIPT, 'env', dir]);
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const line of stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  const exec: Podman['exec'] = (file, args, options = {}) => run('nice', niced([file, ...args]), { ...options, env: { ...env, ...options.env } });
  return {
    env,
    exec,
    podman: (args, options) => exec('podman', args, options),
    waitForLog: (container, pattern) =>
      new Promise((resolve, reject) => {
        const child = spawn('podman', ['logs', '-f', container], { env, stdio: ['ignore', 'pipe', 'pipe'] });
        let seen = '';
        const onData = (chunk: Buffer): void => {
          seen += chunk.toString('utf8');
          const line = seen.split('\n').find((l) => pattern.test(l));
          if (line !== undefined) {
            child.kill();
            resolve(line);
          }
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.on('exit', () => reject(new Error(`${container}'s log ended without ${pattern}: ${seen.slice(-2000)}`)));
      }),
    down: () => podmanDown(dir),
  };
}
