// Second step of `npm run build`: bundles the forward-proxy program from the compiled tree into
// dist/bin/proxy-process.cjs, one self-contained file (no node_modules needed), with the same
// function the local provider uses at run time. Dockerfile.proxy ships this file alone.
import { buildProxyProgram } from '../dist/src/providers/local/proxy-program.js';

const file = await buildProxyProgram(new URL('../dist', import.meta.url).pathname);
process.stdout.write(`built ${file}\n`);
