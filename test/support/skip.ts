/**
 * Names for tests that run only where the environment allows (real Postgres, a second
 * connection, a tool or a mirror on this machine): where the test is skipped, its name says
 * why, so vitest's output says it too (test/support/skip-reporter.ts lists every skipped test
 * whose name carries a reason, at the end of the run). test/skip-reasons.test.ts holds that
 * every conditional skip in test/ names its test with `onlyIf`.
 *
 * @example
 * it.runIf(onPostgres)(onlyIf(onPostgres, 'keeps every callback', NO_POSTGRES), async () => {});
 * // on PGlite alone: "keeps every callback (skipped: TEST_DATABASE_URL is not set)"
 */

/** Why a test that needs the shared real Postgres did not run. */
export const NO_POSTGRES = 'TEST_DATABASE_URL is not set, so there is no real Postgres';

/** Why a test that needs two connections at once did not run on the embedded engine. */
export const ONE_CONNECTION = 'PGlite has one connection; this needs two at once';

/** `name`, or `name (skipped: reason)` when the test will not run here (`runs` false). */
export function onlyIf(runs: boolean, name: string, reason: string): string {
  return runs ? name : `${name} (skipped: ${reason})`;
}

/** Why a test that runs a Debian tool did not run: it is not on the PATH, and how to get it. */
export function noTool(tool: string, debianPackage: string): string {
  return `no ${tool} on PATH (apt-get install -y ${debianPackage})`;
}
