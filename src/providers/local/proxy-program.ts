import { existsSync } from 'node:fs';
import { lstat, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EgressError } from '../../errors.ts';
import { ensureOwnedDir, verifyOwnedFile, verifyTrustedDir } from '../../fs/private-path.ts';
import type { Logger } from '../../logging.ts';
import { writeFileAtomic } from './instance-files.ts';
import { PROXY_HOST_PROGRAM_FILE, PROXY_PROGRAM_FILE } from './process-table.ts';
// Types only: esbuild itself is imported when a bundle is made (a dev dependency; bundleProgram).
import type { build as EsbuildBuild } from 'esbuild';

/**
 * The self-contained programs the orchestrator hands to something else to run: the forward proxy
 * (local proxies of the earlier model, containers, VMs), the local proxy host, and the gcp policy
 * sync. `entry` is relative to the tree's root (the checkout, or dist/ once compiled); `file` is the
 * name of its bundle, which `npm run build` writes into `dist/bin/` (scripts/build-programs.js).
 */
export const PROGRAMS = {
  proxy: { entry: 'src/providers/local/proxy-process', file: PROXY_PROGRAM_FILE, what: 'local proxy program' },
  host: { entry: 'src/providers/local/proxy-host', file: PROXY_HOST_PROGRAM_FILE, what: 'local proxy host program' },
  policySync: { entry: 'src/providers/boot/gce-policy-sync', file: 'policy-sync.cjs', what: 'gcp policy sync program' },
} as const;
export type ProgramName = keyof typeof PROGRAMS;

/** The root of the tree this module runs from: the checkout (TypeScript sources) or dist/ (compiled). */
const TREE_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Compiled (dist/): this module is JavaScript, and the programs' bundles are in dist/bin/. */
const COMPILED = import.meta.url.endsWith('.js');

/** A program's entry in this tree: its TypeScript source, or in the compiled tree its compiled JavaScript. */
export function programEntry(name: ProgramName): string {
  const base = join(TREE_ROOT, PROGRAMS[name].entry);
  return [`${base}.ts`, `${base}.js`].find((path) => existsSync(path)) ?? `${base}.ts`;
}

/** The proxy program could not be built; nothing else can start before that is fixed. */
export class ProxyProgramError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_LOCAL_PROXY_PROGRAM', message, { ...options, retryable: false });
  }
}

/**
 * Builds the forward-proxy process into one self-contained CommonJS file,
 * `<dataDir>/bin/proxy-process.cjs` (PROXY_PROGRAM_FILE), and returns its path.
 *
 * This program is what container and VM proxies run (Dockerfile.proxy, src/providers/boot/), and
 * what local proxies of the earlier one-process-per-proxy model run; local proxies are now served
 * by the proxy host (bundleProxyHostProgram, installProgram). Started with plain `node` it needs no TypeScript
 * loader, which cuts its start from ~0.3 s of CPU to ~0.1 s and its memory by a third
 * (docs/benchmarks.md). The file is rewritten (atomically, so a process starting at that
 * moment reads either version whole) only when the build differs from what is there, so workers
 * sharing a data directory agree on it and running proxies are never disturbed.
 */
export function buildProxyProgram(dataDir: string): Promise<string> {
  return writeProgram(dataDir, PROXY_PROGRAM_FILE, bundleProxyProgram());
}

/** The proxy host's program as one self-contained CommonJS file: the orchestrator's own copy, which installProgram writes. */
export function bundleProxyHostProgram(): Promise<Uint8Array> {
  return programCode('host');
}

/**
 * Puts `code` (the orchestrator's own build, held in memory) at `<dataDir>/bin/<file>` right before
 * it is executed, and returns its path; `replaced` says a different file was there (anything but
 * exactly our build, ours and not writable by group or others: it is rewritten, atomically).
 * The data directory is checked again first (src/fs/private-path.ts: every component ours or
 * root's and not writable by others), so once written nobody else can swap the file before node
 * opens it. Throws UnsafePathError when the directory or bin/ may not be trusted.
 */
export async function installProgram(dataDir: string, file: string, code: Uint8Array): Promise<{ path: string; replaced: boolean }> {
  await verifyTrustedDir(dataDir);
  const dir = join(dataDir, 'bin');
  await ensureOwnedDir(dir);
  const target = join(dir, file);
  const present = await lstat(target).then(
    () => true,
    () => false,
  );
  const intact =
    present &&
    (await verifyOwnedFile(target).then(
      async () => Buffer.compare(await readFile(target), code) === 0,
      () => false,
    ));
  if (!intact) await writeFileAtomic(target, code, 0o600);
  await verifyOwnedFile(target);
  return { path: target, replaced: present && !intact };
}

/**
 * The proxy host program's path, asked right before each start of the host: our own build (made
 * on first use and kept in memory; a failed build is tried again next time) written over whatever
 * is in `<dataDir>/bin/` unless it is exactly that (installProgram), so a replaced file is never
 * executed. A replaced file is logged as a warning.
 */
export function hostProgramInstaller(dataDir: string, logger: Logger): () => Promise<string> {
  let bundled: Promise<Uint8Array> | undefined;
  return async () => {
    bundled ??= bundleProxyHostProgram().catch((err: unknown) => {
      bundled = undefined;
      throw err;
    });
    const installed = await installProgram(dataDir, PROXY_HOST_PROGRAM_FILE, await bundled);
    if (installed.replaced)
      logger.warn(
        { file: installed.path },
        'the proxy host program on disk was not the one this orchestrator built: rewritten from its own build before starting it',
      );
    return installed.path;
  };
}

async function writeProgram(dataDir: string, file: string, bundled: Promise<Uint8Array>): Promise<string> {
  const dir = join(dataDir, 'bin');
  const target = join(dir, file);
  const code = await bundled;
  const existing = await readFile(target).catch(() => undefined);
  if (existing && Buffer.compare(existing, code) === 0) return target;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await writeFileAtomic(target, code);
  return target;
}

/** The forward-proxy program as one self-contained CommonJS file (what buildProxyProgram writes). */
export function bundleProxyProgram(): Promise<Uint8Array> {
  return programCode('proxy');
}

/**
 * One program as a self-contained CommonJS file. Run from dist/, it is the bundle the same
 * `npm run build` wrote beside the compiled tree (dist/bin/), so a production install needs no
 * bundler (esbuild is a dev dependency); from the TypeScript sources, or in a dist/ built without
 * the bundles (tsc alone), it is bundled now with esbuild.
 */
export async function programCode(name: ProgramName): Promise<Uint8Array> {
  const program = PROGRAMS[name];
  if (COMPILED) {
    const built = await readFile(join(TREE_ROOT, 'bin', program.file)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw new ProxyProgramError(`could not read the ${program.what} built by npm run build: ${err.message}`, { cause: err });
    });
    if (built) return new Uint8Array(built);
  }
  return bundleProgram(programEntry(name), program.what);
}

/**
 * Bundles one entry point with esbuild into a self-contained CommonJS file for plain `node` 18 or
 * later (the Node of Debian 12, which booted proxy VMs run: src/providers/boot/). esbuild is loaded
 * only here: without it (a production install) this fails with ERR_LOCAL_PROXY_PROGRAM.
 */
export async function bundleProgram(entry: string, what: string): Promise<Uint8Array> {
  let build: typeof EsbuildBuild;
  try {
    ({ build } = await import('esbuild'));
  } catch (err) {
    throw new ProxyProgramError(
      `could not build the ${what} from ${entry}: esbuild is not installed (a dev dependency); run \`npm run build\` in a full install, which bundles it into dist/bin/`,
      { cause: err },
    );
  }
  try {
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node18',
      write: false,
      logLevel: 'silent',
      legalComments: 'none',
      // Bundling renames clashing identifiers; error classes keep their names in logs and stack traces.
      keepNames: true,
    });
    const output = result.outputFiles[0];
    if (!output) throw new Error('esbuild produced no output');
    return output.contents;
  } catch (err) {
    throw new ProxyProgramError(`could not build the ${what} from ${entry}: ${(err as Error).message}`, { cause: err });
  }
}
