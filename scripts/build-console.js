// Step of `npm run build`: bundles the console's page (console/main.ts and console/app.css, plain
// TypeScript and CSS) with esbuild into dist/console/app.js and app.css. From the sources (tsx,
// EGRESS_FROM_SOURCE=1) the API builds the same bundle in memory on its first console request
// (src/console/assets.ts), with these same options.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** esbuild's options for the console: one ES module and one stylesheet, minified, nothing fetched at run time. */
export function consoleBuildOptions(root = ROOT) {
  return {
    entryPoints: { app: join(root, 'console/main.ts'), style: join(root, 'console/app.css') },
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
    platform: 'browser',
    outdir: join(root, 'dist/console'),
    write: false,
    legalComments: 'none',
    logLevel: 'silent',
    tsconfig: join(root, 'console/tsconfig.json'),
  };
}

/** The bundle as `{ 'app.js': text, 'style.css': text }`. */
export async function bundleConsole(root = ROOT) {
  const { build } = await import('esbuild');
  const result = await build(consoleBuildOptions(root));
  const files = {};
  for (const file of result.outputFiles) files[file.path.slice(file.path.lastIndexOf('/') + 1)] = file.text;
  return files;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = join(ROOT, 'dist/console');
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(await bundleConsole())) {
    writeFileSync(join(dir, name), text);
    process.stdout.write(`built ${join(dir, name)}\n`);
  }
}
