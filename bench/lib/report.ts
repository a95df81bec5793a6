/**
 * What every bench's results carry and how its tables print: the machine a run measured
 * (`machine`), and a Markdown grid of cells (`printGrid`), shared by `npm run bench`
 * (bench/run.ts) and `npm run bench:growth` (bench/growth.ts).
 *
 * @example
 * printGrid(['size', 'p99 ms'], [['1 M', '4.2']]);
 * const info = machine('15.4');
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { round } from '../context.ts';
import { ROOT } from './children.ts';

/**
 * The machine and the code a run measured: CPUs, memory, Node, Postgres, kernel, commit, and
 * the tracked files that differ from that commit (a run of uncommitted code says so).
 */
export function machine(postgresVersion: string) {
  let commit = 'unknown';
  let uncommitted: string[] = [];
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT }).toString();
    commit = git('rev-parse', '--short', 'HEAD').trim();
    uncommitted = git('status', '--porcelain', '--untracked-files=no')
      .split('\n')
      .filter((line) => line.length > 3)
      .map((line) => line.slice(3));
  } catch {
    // not a git checkout
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: round(totalmem() / 2 ** 30, 1),
    node: process.version,
    postgres: postgresVersion,
    kernel: readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim(),
    commit,
    uncommitted,
  };
}

/** A Markdown table: `header`, then one line per row of `cells`, columns padded to fit. */
export function printGrid(header: string[], cells: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `| ${c.map((v, i) => v.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const c of cells) console.log(line(c));
}
