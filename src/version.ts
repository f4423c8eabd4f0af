import { readFileSync } from 'node:fs';

/**
 * The package's version, from its package.json: two levels up from the sources (src/version.ts)
 * and three from the compiled tree (dist/src/version.js).
 */
export function packageVersion(): string {
  for (const path of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'egress-proxies' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not this one
    }
  }
  return 'unknown';
}
