// `npm run build`: compiles the TypeScript (tsc -p tsconfig.build.json -> dist/), bundles the programs
// the orchestrator hands out to run (scripts/build-programs.js -> dist/bin/)
// and the console's page (scripts/build-console.js -> dist/console/), then records in
// dist/.source-hash the fingerprint of the sources it compiled, taken before it started: `npm start`
// compares it to skip a build that would change nothing. A failed build records nothing, so the next start builds again.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const HASH_FILE = join(ROOT, 'dist', '.source-hash');

/** What the build reads: the compiled trees, the bundler step and the files that configure them. */
const INPUT_DIRS = ['src', 'queues', 'workers', 'console'];
const INPUT_FILES = [
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'package-lock.json',
  'scripts/build-programs.js',
  'scripts/build-console.js',
  'scripts/build.js',
];

function filesUnder(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

/** sha256 over every input's path and content, in a fixed order. */
export function sourceHash() {
  const files = [...INPUT_DIRS.flatMap((d) => filesUnder(join(ROOT, d))), ...INPUT_FILES.map((f) => join(ROOT, f))].sort();
  const hash = createHash('sha256');
  for (const file of files) {
    hash.update(relative(ROOT, file)).update('\0');
    hash.update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

/** The fingerprint the last successful build recorded, or undefined. */
export function builtHash() {
  try {
    return readFileSync(HASH_FILE, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Runs one step quietly; its output (tsc's errors are on stdout) is shown only when it fails. */
function step(args) {
  const result = spawnSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8' });
  if (result.status === 0) return;
  process.stderr.write(`${result.stdout ?? ''}${result.stderr ?? ''}`);
  throw new Error(`build step failed: node ${relative(ROOT, args[0] ?? '')} (exit ${result.status ?? result.signal})`);
}

/** Builds dist/ and records `hash`, the fingerprint of the sources taken before the build began. */
export function build(hash = sourceHash()) {
  step([join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json')]);
  step([join(ROOT, 'scripts/build-programs.js')]);
  step([join(ROOT, 'scripts/build-console.js')]);
  writeFileSync(HASH_FILE, `${hash}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    build();
    process.stdout.write(`built ${join(ROOT, 'dist')}\n`);
  } catch (err) {
    process.stderr.write(`error: ${err.message}\n`);
    process.exit(1);
  }
}
