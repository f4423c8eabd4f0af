import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';
import { EgressError } from '../errors.ts';

/** One file of the console's page, as served: its bytes, gzipped bytes and a content hash for its URL. */
export interface ConsoleAsset {
  readonly file: string;
  readonly contentType: string;
  readonly body: Buffer;
  readonly gzipped: Buffer;
  /** `app.<hash>.js`: the URL changes with the content, so it may be cached for good. */
  readonly path: string;
}

export interface ConsoleAssets {
  readonly script: ConsoleAsset;
  readonly style: ConsoleAsset;
  byPath(path: string): ConsoleAsset | undefined;
}

export class ConsoleAssetsMissingError extends EgressError {
  constructor(cause: unknown) {
    super('ERR_CONSOLE_ASSETS_MISSING', 'the console page is not built: run `npm run build` (dist/console/ is missing)', { cause });
  }
}

function asset(file: string, text: string, contentType: string): ConsoleAsset {
  const body = Buffer.from(text, 'utf8');
  const hash = createHash('sha256').update(body).digest('base64url').slice(0, 16);
  const dot = file.lastIndexOf('.');
  return { file, contentType, body, gzipped: gzipSync(body, { level: 9 }), path: `${file.slice(0, dot)}.${hash}${file.slice(dot)}` };
}

function assetsOf(files: Record<string, string>): ConsoleAssets {
  const script = asset('app.js', files['app.js'] ?? '', 'text/javascript; charset=utf-8');
  const style = asset('style.css', files['style.css'] ?? '', 'text/css; charset=utf-8');
  return { script, style, byPath: (path) => [script, style].find((a) => a.path === path) };
}

/** True when this module runs from the TypeScript sources (tsx), not from dist/. */
const FROM_SOURCE = import.meta.url.endsWith('.ts');

/**
 * The page's files: dist/console/ when running the build; from the sources, the same bundle made in
 * memory by esbuild (a dev dependency) with scripts/build-console.js's options. Loaded once per process.
 */
async function loadAssets(): Promise<ConsoleAssets> {
  if (FROM_SOURCE) {
    const builder = new URL('../../scripts/build-console.js', import.meta.url).href;
    const { bundleConsole } = (await import(builder)) as { bundleConsole: () => Promise<Record<string, string>> };
    return assetsOf(await bundleConsole());
  }
  const dir = new URL('../../console/', import.meta.url);
  try {
    const [script, style] = await Promise.all([readFile(new URL('app.js', dir), 'utf8'), readFile(new URL('style.css', dir), 'utf8')]);
    return assetsOf({ 'app.js': script, 'style.css': style });
  } catch (err) {
    throw new ConsoleAssetsMissingError(err);
  }
}

let loading: Promise<ConsoleAssets> | undefined;

/** The console's files, loaded (or bundled) on first use; a failed load is tried again on the next request. */
export function consoleAssets(): Promise<ConsoleAssets> {
  loading ??= loadAssets().catch((err: unknown) => {
    loading = undefined;
    throw err;
  });
  return loading;
}
