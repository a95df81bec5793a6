import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    globalSetup: ['test/support/global-setup.ts'],
    // the default output, then which tests were skipped here and why
    reporters: ['default', './test/support/skip-reporter.ts'],
  },
});
