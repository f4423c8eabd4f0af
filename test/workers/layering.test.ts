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

/** Every package a file imports or re-exports (bare specifiers, `node:` built-ins left out). */
function packagesOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(?\s*)'([^.'][^']*)'/g)].map((m) => m[1] ?? '').filter((s) => !s.startsWith('node:'));
}

/** The imports of every file under `dirs` that `forbidden` rejects, as `file → import`. */
function reaching(dirs: readonly string[], forbidden: (spec: string) => boolean): string[] {
  return dirs.flatMap((d) => sources(d)).flatMap((f) => [...importsOf(f), ...packagesOf(f)].filter(forbidden).map((i) => `${f} → ${i}`));
}

describe('layering', () => {
  test('the domain and the API routes ask for work through the work-requests port: no bullmq, no job boundary', () => {
    // queues/ is the job boundary; src/jobs/bullmq-work-requests.ts the port's BullMQ implementation, which roles compose.
    const jobBoundary = (i: string): boolean =>
      i === 'bullmq' || i.startsWith('bullmq/') || i.startsWith('queues/') || i === 'src/jobs/bullmq-work-requests.ts';
    expect(reaching(['src/proxies', 'src/pools', 'src/readiness', 'src/checks', 'src/api/routes'], jobBoundary)).toEqual([]);
  });

  test('src/health and src/store import neither queues/ nor src/providers/', () => {
    expect(reaching(['src/health', 'src/store'], (i) => i.startsWith('queues/') || i.startsWith('src/providers/'))).toEqual([]);
  });

  test("the forward proxy core uses no package but undici's HTTP/1.1 client, and nothing of ours but src/http (it is bundled into every proxy program)", () => {
    const allowed = (i: string): boolean =>
      i.startsWith('src/forward-proxy/') || i.startsWith('src/http/') || i === 'undici/lib/dispatcher/client.js' || i === 'undici';
    expect(reaching(['src/forward-proxy'], (i) => !allowed(i))).toEqual([]);
  });

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

  test('no two folders of src/ import each other, directly or round a longer circle', () => {
    // A folder is src/<name>/ (a top-level file of src/ is its own unit); the graph of folders must be acyclic.
    const unitOf = (file: string): string | undefined => (file.startsWith('src/') ? file.split('/').slice(0, 2).join('/') : undefined);
    const edges = new Map<string, Set<string>>();
    for (const f of sources('src')) {
      const from = unitOf(f) ?? f;
      for (const i of importsOf(f)) {
        const to = unitOf(i);
        if (to === undefined || to === from) continue;
        if (!edges.has(from)) edges.set(from, new Set());
        edges.get(from)?.add(to);
      }
    }
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (unit: string, path: string[]): void => {
      if (state.get(unit) === 'done') return;
      if (state.get(unit) === 'open') {
        cycles.push([...path.slice(path.indexOf(unit)), unit].join(' → '));
        return;
      }
      state.set(unit, 'open');
      for (const next of edges.get(unit) ?? []) visit(next, [...path, unit]);
      state.set(unit, 'done');
    };
    for (const unit of edges.keys()) visit(unit, []);
    expect(cycles).toEqual([]);
  });

  test('only queues/ constructs BullMQ queues and workers', () => {
    const constructing = [...sources('src'), ...sources('workers')].filter((f) => /new (Queue|Worker)\(/.test(readFileSync(join(root, f), 'utf8')));
    expect(constructing).toEqual([]);
  });
});
