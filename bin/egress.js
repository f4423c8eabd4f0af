#!/usr/bin/env node
// Entry point of the `egress` command. It runs the compiled tree (`npm run build` writes dist/);
// a checkout without a build (or EGRESS_FROM_SOURCE=1, which the test suite sets so that it
// always runs the sources it tests) runs the TypeScript sources through tsx, a dev dependency.
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/src/cli/main.js', import.meta.url);
let main;
if (process.env.EGRESS_FROM_SOURCE !== '1' && existsSync(compiled)) {
  ({ main } = await import(compiled.href));
} else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write('error: egress is not built and tsx is not installed: run `npm run build` (or `npm install` for the dev tools)\n');
    process.exit(2);
  }
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
process.exitCode = await main(process.argv.slice(2), process.env);
