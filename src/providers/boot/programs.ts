/**
 * The programs a booted proxy VM runs, bundled once per process: the forward proxy (the same
 * program the local provider and Dockerfile.proxy run) and, on gcp, the policy sync; from dist/ the
 * bundles `npm run build` made (proxy-program.ts, programCode).
 */
import { programCode } from '../local/proxy-program.ts';

/** File contents of the programs the user-data installs. */
export interface BootPrograms {
  proxy: Uint8Array;
  policySync: Uint8Array;
}

let cached: Promise<BootPrograms> | undefined;

/** Builds the programs on first use; a failed build is not cached (the next call tries again). */
export function bootPrograms(): Promise<BootPrograms> {
  cached ??= (async () => ({
    proxy: await programCode('proxy'),
    policySync: await programCode('policySync'),
  }))();
  cached.catch(() => {
    cached = undefined;
  });
  return cached;
}
