import { defineConfig } from 'vitest/config';

/** `npm run test:real`: real VMs and containers (docs/testing.md), one file at a time. */
export default defineConfig({
  test: {
    include: ['test/real/**/*.test.ts'],
    fileParallelism: false,
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/temp-dirs-cleanup.ts'],
    testTimeout: 20 * 60_000,
    hookTimeout: 20 * 60_000,
    reporters: ['default'],
    env: { EGRESS_FROM_SOURCE: '1' },
  },
});
