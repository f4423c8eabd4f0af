import { execFile } from 'node:child_process';
import { cp, mkdir, readFile, symlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from './cli.ts';

const run = promisify(execFile);

/**
 * A Dockerfile played on this machine without a Docker engine: each stage's file system is a
 * directory, COPY copies what the image would hold, and the RUN steps that produce the image's
 * files are run for real, with one stand-in: `npm ci` without `--omit=dev` (the build stage's full
 * install of the same lock) is a symlink to this checkout's node_modules, which `npm ci` made.
 * `npm ci --omit=dev` (what the image ships), its pruning (`rm -rf node_modules/…`, `find node_modules…`) and `npm run build` do run. RUN steps about the base system (apt-get, users, ownership) are
 * recognised and skipped; any other RUN step fails the test, so a new one cannot slip past.
 */
export interface Instruction {
  op: string;
  args: string;
}

export interface StageResult {
  name: string | undefined;
  from: string;
  /** The stage's `/`, a directory on this machine. */
  root: string;
  workdir: string;
  env: Record<string, string>;
  user: string | undefined;
  entrypoint: string[];
  cmd: string[];
  healthcheck: string | undefined;
  /** RUN steps not run here (base system), for the record. */
  skipped: string[];
}

export function parseDockerfile(text: string): { from: string; name: string | undefined; instructions: Instruction[] }[] {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const stages: { from: string; name: string | undefined; instructions: Instruction[] }[] = [];
  for (const line of lines) {
    const [op = '', ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    if (op.toUpperCase() === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      stages.push({ from: m?.[1] ?? args, name: m?.[2], instructions: [] });
    } else {
      const stage = stages.at(-1);
      if (!stage) throw new Error(`Dockerfile: ${op} before FROM`);
      stage.instructions.push({ op: op.toUpperCase(), args });
    }
  }
  return stages;
}

/** RUN steps that set up the base system, not the application's files. */
const SYSTEM_STEPS = [/^apt-get /, /^rm -rf \/var\/lib\/apt\/lists/, /^mkdir -p \/var\/lib\/egress$/, /^chown /, /^npm cache clean/];

function json(args: string): string[] {
  return JSON.parse(args) as string[];
}

export interface PlayOptions {
  /** Where the stages' roots are made. */
  dir: string;
  /** Played stages by content, shared between Dockerfiles (keep it for as long as `dir` exists). */
  cache?: Map<string, StageResult>;
  /** Receives the output of the RUN steps that are run. */
  log?: (line: string) => void;
}

export async function playDockerfile(file: string, options: PlayOptions): Promise<StageResult[]> {
  const stages = parseDockerfile(await readFile(join(ROOT, file), 'utf8'));
  const results: StageResult[] = [];
  for (const [i, stage] of stages.entries()) {
    // Two Dockerfiles with the same build stage (same base, same steps) share its played result, as Docker's layer cache would.
    const key = JSON.stringify([stage.from, stage.instructions]);
    const cached = options.cache?.get(key);
    if (cached) {
      results.push({ ...cached, name: stage.name });
      continue;
    }
    const result: StageResult = {
      name: stage.name,
      from: stage.from,
      root: join(options.dir, `stage-${i}`),
      workdir: '/',
      env: {},
      user: undefined,
      entrypoint: [],
      cmd: [],
      healthcheck: undefined,
      skipped: [],
    };
    await mkdir(result.root, { recursive: true });
    const inStage = (path: string): string => join(result.root, posix.resolve(result.workdir, path));
    for (const { op, args } of stage.instructions) {
      switch (op) {
        case 'WORKDIR':
          result.workdir = posix.resolve(result.workdir, args);
          await mkdir(inStage('.'), { recursive: true });
          break;
        case 'COPY': {
          const parts = args.split(/\s+/);
          let fromRoot = ROOT;
          if (parts[0]?.startsWith('--from=')) {
            const name = parts.shift()?.slice('--from='.length);
            const source = results.find((r) => r.name === name);
            if (!source) throw new Error(`${file}: COPY --from=${name}: no such stage`);
            fromRoot = source.root;
          }
          const dest = parts.pop() ?? '';
          for (const src of parts) {
            const from = join(fromRoot, src);
            const into = dest.endsWith('/') ? join(inStage(dest), posix.basename(src)) : inStage(dest);
            await mkdir(join(into, '..'), { recursive: true });
            await cp(from, into, { recursive: true });
          }
          break;
        }
        case 'RUN':
          for (const step of args.split('&&').map((s) => s.trim())) {
            const cwd = inStage('.');
            if (/^npm ci\b/.test(step) && !step.includes('--omit=dev')) {
              await symlink(join(ROOT, 'node_modules'), join(cwd, 'node_modules'));
            } else if (/^npm ci\b/.test(step) || step === 'npm run build') {
              const [cmd = '', ...argv] = step.split(/\s+/);
              const { stdout, stderr } = await run(cmd, argv, { cwd, env: { ...process.env, EGRESS_FROM_SOURCE: '' }, maxBuffer: 16 << 20 });
              options.log?.(`${file}: ${step}\n${stdout}${stderr}`);
            } else if (/^(rm -rf node_modules\/|find node_modules[/ ])/.test(step)) {
              // Pruning of the production install: run on the stage's own node_modules.
              await run('sh', ['-c', step], { cwd });
            } else if (SYSTEM_STEPS.some((re) => re.test(step))) {
              result.skipped.push(step);
            } else {
              throw new Error(`${file}: RUN ${step}: a step this test does not know how to play; teach test/support/dockerfile.ts`);
            }
          }
          break;
        case 'ENV': {
          const m = /^(\S+?)[= ](.*)$/.exec(args);
          if (m?.[1]) result.env[m[1]] = m[2] ?? '';
          break;
        }
        case 'USER':
          result.user = args;
          break;
        case 'ENTRYPOINT':
          result.entrypoint = json(args);
          break;
        case 'CMD':
          result.cmd = json(args);
          break;
        case 'HEALTHCHECK':
          result.healthcheck = args;
          break;
        case 'EXPOSE':
          break;
        default:
          throw new Error(`${file}: ${op} is not played by test/support/dockerfile.ts`);
      }
    }
    results.push(result);
    options.cache?.set(key, result);
  }
  return results;
}

/** `/app/x` inside the stage -> its path on this machine; other arguments unchanged. */
export function hostPath(stage: StageResult, arg: string): string {
  return arg.startsWith('/app/') ? join(stage.root, arg) : arg;
}
