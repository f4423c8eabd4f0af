import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/real/ is `npm run test:real` (vitest.real.config.ts): real VMs and podman builds, root, minutes.
    exclude: [...configDefaults.exclude, 'test/real/**'],
    // Two files at a time (this machine and CI have 2 cores): most files wait on processes, Redis
    // and timers rather than compute, so the suite takes ~9 minutes instead of ~14. Files share only
    // the run's Redis (each under its own prefix) and the KVM test host (each under its own names).
    fileParallelism: true,
    maxWorkers: 2,
    globalSetup: ['test/support/global-setup.ts'],
    // Every test file removes the temporary directories it made (test/support/temp-dirs.ts).
    setupFiles: ['test/support/temp-dirs-cleanup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    // bin/egress.js runs the sources under test, not a dist/ a previous `npm run build` left behind.
    env: { EGRESS_FROM_SOURCE: '1' },
  },
});
