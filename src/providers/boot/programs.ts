/**
 * The programs a booted proxy VM runs, bundled once per process: the forward proxy (the same
 * program the local provider and Dockerfile.proxy run) and, on gcp, the policy sync.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleProgram, bundleProxyProgram } from '../local/proxy-program.ts';

/** File contents of the programs the user-data installs. */
export interface BootPrograms {
  proxy: Uint8Array;
  policySync: Uint8Array;
}

/** This directory's entry: its TypeScript source, or in the compiled tree (dist/) its JavaScript. */
function entry(base: string): string {
  const candidates = [new URL(`./${base}.ts`, import.meta.url), new URL(`./${base}.js`, import.meta.url)].map((u) => fileURLToPath(u));
  return candidates.find((p) => existsSync(p)) ?? candidates[0]!;
}

let cached: Promise<BootPrograms> | undefined;

/** Builds the programs on first use; a failed build is not cached (the next call tries again). */
export function bootPrograms(): Promise<BootPrograms> {
  cached ??= (async () => ({
    proxy: await bundleProxyProgram(),
    policySync: await bundleProgram(entry('gce-policy-sync'), 'gcp policy sync program'),
  }))();
  cached.catch(() => {
    cached = undefined;
  });
  return cached;
}
