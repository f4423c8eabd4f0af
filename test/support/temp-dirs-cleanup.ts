import { afterAll } from 'vitest';
import { removeTempDirs } from './temp-dirs.ts';

// A setup file (vitest.config.ts): registered before the test file's own hooks, so with
// vitest's stacked hook order it runs after them, once the roles and processes using the
// directories are closed.
afterAll(removeTempDirs);
