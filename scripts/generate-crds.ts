import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CRD_FILES } from '../src/crds/definitions.ts';
import { renderCrdFile } from '../src/crds/render.ts';

// `npm run crds`: writes the CustomResourceDefinitions generated from the zod schemas.
const root = join(import.meta.dirname, '..');
for (const file of CRD_FILES) {
  const target = join(root, file.path);
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, renderCrdFile(file.build()));
  console.log(`wrote ${file.path}`);
}
