import { Writable } from 'node:stream';

/** A stream a CLI command writes to, and what it wrote. */
export function capture() {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

/**
 * Runs `switchboard flows ...` in-process from `cwd`: its exit code and what it printed.
 *
 * @example
 * const { code, out } = await runFlowsCli(['validate', '--dir', dir], dir);
 */
export async function runFlowsCli(argv: string[], cwd: string) {
  const { runFlows } = await import('../../src/cli/flows.ts');
  const stdout = capture();
  const stderr = capture();
  const code = await runFlows(argv, { stdout: stdout.stream, stderr: stderr.stream, cwd });
  return { code, out: stdout.text(), err: stderr.text() };
}
