/**
 * The README's `flows simulate` example (section "The flow language"), run exactly as printed:
 * the line is read from README.md, not copied here, and run by a shell in the repository, so
 * the README cannot drift from the command. It must succeed and end with an outcome.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The one README line that runs `flows simulate`, inside the flow language section. */
function readmeSimulateLine(): string {
  const readme = readFileSync(`${ROOT}/README.md`, 'utf8');
  const section = readme.slice(readme.indexOf('## The flow language'));
  const lines = section.split('\n').filter((l) => l.startsWith('npx switchboard flows simulate'));
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

describe("the README's simulate example", () => {
  it('runs as printed and ends with an outcome, both sides agreeing', async () => {
    const line = readmeSimulateLine();
    const { stdout } = await promisify(execFile)('sh', ['-c', line], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: '1' },
    });
    expect(stdout).toMatch(/^outcome: (?!\(none\))\S+$/m);
    expect(stdout).toContain('ended: hung up');
    expect(stdout).toContain('machine and menu JSON agree');
  }, 60_000);
});
