// Second step of `npm run build`: bundles, from the compiled tree, each program the orchestrator hands
// to something else to run (PROGRAMS in src/providers/local/proxy-program.ts: the forward proxy, the
// local proxy host, the gcp policy sync) into dist/bin/<file>, one self-contained CommonJS file each
// (no node_modules needed). The compiled orchestrator reads them from there instead of bundling at run
// time, so a production install needs no esbuild; Dockerfile.proxy ships dist/bin/proxy-process.cjs alone.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleProgram, programEntry, PROGRAMS } from '../dist/src/providers/local/proxy-program.js';

const dir = fileURLToPath(new URL('../dist/bin', import.meta.url));
mkdirSync(dir, { recursive: true });
for (const [name, program] of Object.entries(PROGRAMS)) {
  // Always esbuild over the compiled entry just made: a bundle left by an earlier build is never reused.
  const file = join(dir, program.file);
  writeFileSync(file, await bundleProgram(programEntry(name), program.what));
  process.stdout.write(`built ${file}\n`);
}
