/**
 * What the ops tests share: finding the Debian tools they drive (each test skips, saying
 * which package to install, when its tool is missing), running the runbook's own shell blocks
 * (docs/operations.md marks each with `<!-- ops-test: name -->` so the tests run exactly what
 * the page prints), and the metric names a PromQL expression reads.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The tool's path on PATH, or undefined; logs why the test that needs it is skipped. */
export function requireTool(tool: string, debianPackage: string, test: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' });
  const path = found.status === 0 ? found.stdout.trim() : undefined;
  if (path === undefined) {
    console.warn(`${test}: skipped, no ${tool} on PATH (apt-get install -y ${debianPackage})`);
  }
  return path;
}

/** The shell block that follows `<!-- ops-test: name -->` in docs/operations.md. */
export function runbookBlock(name: string): string {
  const page = readFileSync(`${ROOT}/docs/operations.md`, 'utf8');
  const marker = `<!-- ops-test: ${name} -->`;
  const at = page.indexOf(marker);
  if (at < 0) throw new Error(`docs/operations.md has no ${marker}`);
  const m = page.slice(at + marker.length).match(/^\s*```sh\n([\s\S]*?)\n```/);
  if (!m) throw new Error(`${marker} in docs/operations.md is not followed by a sh block`);
  return m[1] as string;
}

/** Runs a runbook block with bash (-e -u -o pipefail) and `env` added; throws with its output. */
export function runBlock(name: string, env: Record<string, string>): string {
  try {
    return execFileSync('bash', ['-euo', 'pipefail', '-c', runbookBlock(name)], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `runbook block ${name} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
  }
}

const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
]);

/**
 * The metric names an expression selects, and the label names matched on each. Strings,
 * ranges and grouping lists are removed first; what is left that is a name and not a
 * function call, a keyword or a number is a metric.
 */
export function metricsOf(expr: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const noStrings = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
  for (const m of noStrings.matchAll(/([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}/g)) {
    const labels = out.get(m[1] as string) ?? new Set<string>();
    for (const l of (m[2] as string).matchAll(/([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)/g)) {
      labels.add(l[1] as string);
    }
    out.set(m[1] as string, labels);
  }
  const bare = noStrings
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  for (const m of bare.matchAll(/(?<![\w.$])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()/g)) {
    const name = m[1] as string;
    if (KEYWORDS.has(name.toLowerCase())) continue;
    if (!out.has(name)) out.set(name, new Set());
  }
  return out;
}

/** Sample names and their label names in a Prometheus text exposition. */
export function scrapedSeries(text: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s/);
    if (!m) continue;
    const labels = out.get(m[1] as string) ?? new Set<string>();
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_]\w*)="/g)) labels.add(l[1] as string);
    out.set(m[1] as string, labels);
  }
  return out;
}
