import { defineConfig } from 'vitest/config';

// `npm run test:real`: the suites that run the project's files for real on this machine (test/real/):
// podman builds and runs the images (root; scripts/container-stand-ins.sh). One file at a time: each
// is mostly builds and container start-ups competing for the same two cores.
export default defineConfig({
  test: {
    include: ['test/real/**/*.test.ts'],
    fileParallelism: false,
    maxWorkers: 1,
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/temp-dirs-cleanup.ts'],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    reporters: ['default'],
  },
});
