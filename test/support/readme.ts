/**
 * Reading README.md's commands and running them as printed: its fenced code blocks (with the
 * section each sits in), the commands quoted inline in its prose, a bash that runs a block in a
 * process group of its own (so a server a block starts in the background is stopped with it),
 * and the JSON values a block of `curl`s prints one after another.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface FencedBlock {
  /** the fence's language (`sh`, `json`, ...; '' for none) */
  lang: string;
  /** the block's text, without its fences, dedented by the opening fence's indent */
  text: string;
  /** the `##` heading the block sits under */
  section: string;
  /** 1-based line of the opening fence */
  line: number;
}

export function readReadme(): string {
  return readFileSync(`${ROOT}/README.md`, 'utf8');
}

/** Every fenced block of `markdown`, in order. */
export function fencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split('\n');
  const blocks: FencedBlock[] = [];
  let section = '';
  for (let i = 0; i < lines.length; i++) {
    const heading = lines[i]!.match(/^## (.+)$/);
    if (heading) section = heading[1]!.trim();
    const open = lines[i]!.match(/^(\s*)```(\S*)\s*$/);
    if (!open) continue;
    const indent = open[1]!.length;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j]!)) {
      const l = lines[j]!;
      body.push(l.slice(Math.min(indent, l.length - l.trimStart().length)));
      j++;
    }
    blocks.push({ lang: open[2]!, text: body.join('\n'), section, line: i + 1 });
    i = j;
  }
  return blocks;
}

/**
 * The inline code spans of `markdown`'s prose (outside fenced blocks) that start with one of
 * `prefixes`, whitespace (a span may wrap across lines) collapsed to single spaces.
 */
export function inlineCommands(markdown: string, prefixes: string[]): string[] {
  const prose = markdown.replace(/^\s*```[^\n]*\n[\s\S]*?^\s*```\s*$/gm, '');
  const spans = [...prose.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\s+/g, ' ').trim());
  return spans.filter((s) => prefixes.some((p) => s.startsWith(p)));
}

/**
 * What a block of commands printed, split into its values: each JSON object or array parsed
 * (`curl -s` prints answers back to back, without newlines), each other non-empty line as text.
 */
export function printedValues(output: string): unknown[] {
  const values: unknown[] = [];
  let i = 0;
  while (i < output.length) {
    const c = output[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '{' || c === '[') {
      const end = jsonEnd(output, i);
      values.push(JSON.parse(output.slice(i, end)));
      i = end;
    } else {
      const nl = output.indexOf('\n', i);
      const end = nl === -1 ? output.length : nl;
      values.push(output.slice(i, end).trimEnd());
      i = end;
    }
  }
  return values;
}

/** The index just past the JSON object or array that starts at `start`. */
function jsonEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  throw new Error(`unterminated JSON from offset ${start}: ${text.slice(start, start + 200)}`);
}

export interface BashRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface BashSession {
  /** resolves when bash itself exits (its background jobs may still run) */
  done: Promise<BashRun>;
  /** ends bash and everything it started (its process group), and waits until they are gone */
  stop(): Promise<void>;
}

/**
 * Runs `script` with `bash -e` (any command that fails ends it, with its status) in `cwd`, with
 * exactly `env`, in a process group of its own. After `timeoutMs` the group is ended and
 * `done` rejects with what was printed so far.
 */
export function runBash(
  script: string,
  opts: { env: Record<string, string>; cwd?: string; timeoutMs: number },
): BashSession {
  const child: ChildProcess = spawn('bash', ['-e', '-c', script], {
    cwd: opts.cwd ?? ROOT,
    env: opts.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const stop = async () => {
    await killGroup(child.pid!);
  };
  const done = new Promise<BashRun>((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop().then(() =>
        reject(
          new Error(
            `timed out after ${opts.timeoutMs} ms\n--- stdout\n${stdout}\n--- stderr\n${stderr}`,
          ),
        ),
      );
    }, opts.timeoutMs);
    // 'close': the exit and every byte of its output; a background job that keeps the pipes
    // open would hold it, so those redirect their output to files
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
  return { done, stop };
}

/** SIGTERM to process group `pgid`, then SIGKILL after 15 s; resolves once the group is gone. */
async function killGroup(pgid: number): Promise<void> {
  const alive = () => {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  process.kill(-pgid, 'SIGTERM');
  const deadline = Date.now() + 15_000;
  // a barrier on a real condition (the group is gone), with a deadline
  while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (alive()) process.kill(-pgid, 'SIGKILL');
}

/** A TCP port free on loopback right now (for a process that must be told its port first). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** The tools of `tools` this machine lacks (not on PATH). */
export function missingTools(...tools: string[]): string[] {
  return tools.filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
}

/** Why a test that needs `missing` did not run, with the Debian packages that bring them. */
export function toolsReason(missing: string[]): string {
  return `${missing.join(' and ')} not installed (apt-get install ${missing.join(' ')})`;
}
