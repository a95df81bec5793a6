/**
 * A vitest reporter beside the default one: at the end of the run, every skipped test whose
 * name says why (test/support/skip.ts) or that was skipped with a note (`ctx.skip(note)`),
 * one line each, so the reasons are in the output and not only the count of skipped tests.
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class SkipReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const lines: string[] = [];
    for (const mod of modules) {
      for (const test of mod.children.allTests('skipped')) {
        const result = test.result();
        const note = result.state === 'skipped' ? result.note : undefined;
        if (note === undefined && !test.fullName.includes('(skipped: ')) continue;
        lines.push(
          `  ${mod.relativeModuleId} > ${test.fullName}${note === undefined ? '' : ` (skipped: ${note})`}`,
        );
      }
    }
    if (lines.length === 0) return;
    process.stdout.write(`\nSkipped here, and why:\n${lines.join('\n')}\n`);
  }
}
