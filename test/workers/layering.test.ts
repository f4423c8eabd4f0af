import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, test } from 'vitest';

// The tree draws as entry points → roles → workers/ consumers → domain → ports → adapters, with
// queues/ (the job boundary) depended on and depending on nothing of ours.

const root = join(import.meta.dirname, '..', '..');

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

/** Every relative module a file imports or re-exports, resolved against the project root. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const specs = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(?\s*)'(\.[^']+)'/g)].map((m) => m[1] ?? '');
  return specs.map((s) => relative(root, join(root, file, '..', s)));
}

describe('layering', () => {
  test('queues/ imports nothing of ours outside itself', () => {
    const outside = sources('queues').flatMap((f) =>
      importsOf(f)
        .filter((i) => !i.startsWith('queues/'))
        .map((i) => `${f} → ${i}`),
    );
    expect(outside).toEqual([]);
  });

  test('below the entry points, nothing in src/ reaches into workers/', () => {
    const upward = sources('src')
      .filter((f) => !f.startsWith('src/cli/'))
      .flatMap((f) =>
        importsOf(f)
          .filter((i) => i.startsWith('workers/'))
          .map((i) => `${f} → ${i}`),
      );
    expect(upward).toEqual([]);
  });

  test('only queues/ constructs BullMQ queues and workers', () => {
    const constructing = [...sources('src'), ...sources('workers')].filter((f) => /new (Queue|Worker)\(/.test(readFileSync(join(root, f), 'utf8')));
    expect(constructing).toEqual([]);
  });
});
