/**
 * `switchboard flows replay <id> --file changed.yaml [--since 7d]`: the flow's stored calls
 * of a period replayed through a changed flow by a running Switchboard
 * (`POST /v1/flows/{id}/replay`, src/calls/replay.ts), printed call by call where the path,
 * the outcome or the follow-ups would differ, then the totals (same, differing, skipped with
 * their reasons). The server holds the calls, so the command talks to it (`--url`, else
 * SWITCHBOARD_URL, ...: src/cli/io.ts) with an API token of scope `read` (`--token`, else the
 * first of API_TOKEN).
 *
 * Exit codes: 0 every replayed call is the same; 1 some call would differ; 2 nothing was
 * replayed (bad flags, unreadable file, a draft that does not compile, an unknown flow, a bad
 * `--since`, the server unreachable or refusing the token).
 *
 * @example
 * switchboard flows replay appointment-reminder --file changed.yaml --since 7d
 * switchboard flows replay appointment-reminder --file changed.yaml --since 2025-03-01 --json
 */
import { readFile } from 'node:fs/promises';
import { relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type {
  FlowReplayReport,
  ReplayedCall,
  ReplayFollowUp,
  ReplayStep,
} from '../calls/replay.ts';
import { createTransport, ProviderError } from '../provider/http.ts';
import { type ErrorAnswer, switchboardTarget, unreachable } from './io.ts';

/** What `flows replay` needs from the process; `env` defaults to the process's. */
export interface FlowsReplayIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  cwd: string;
  env?: Record<string, string | undefined>;
}

const USAGE = `Usage: switchboard flows replay <id> --file changed.yaml [--since 7d] [options]

Replays the stored calls of flow <id> (their keys, silences, statuses and timers) through the
changed flow in --file, on the running Switchboard that holds them, and prints each call whose
path, outcome or follow-ups (type and rendered text) would differ, then the totals. Nothing is
sent or changed.

Options:
  --file <path>      the changed flow's YAML (required)
  --since <when>     calls started since then: 30m, 12h, 7d, 2w or an ISO 8601 time (default 7d)
  --until <when>     and before then (default: now)
  --limit <n>        at most n calls, the oldest first
  --json             print the server's report as JSON
  --url <base>       Switchboard's address (default $SWITCHBOARD_URL, else http://$HOST:$PORT,
                     localhost:3000 when unset)
  --token <token>    API token with scope read (default: the first of API_TOKEN)

Exit codes: 0 no replayed call differs; 1 some call would differ; 2 nothing was replayed (bad
flags or file, a draft that does not compile, an unknown flow, a bad --since, the server
unreachable or refusing).
`;

/** Shown per list before "... and n more". */
const SHOWN = 50;

class UsageError extends Error {}

function flags(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      file: { type: 'string', short: 'f' },
      since: { type: 'string' },
      until: { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean' },
      url: { type: 'string' },
      token: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

const step = (s: ReplayStep | null) =>
  s === null ? 'nothing (the call ends)' : `${s.node}:${s.key}${s.input ? ` (${s.input})` : ''}`;
const steps = (list: ReplayStep[]) =>
  list.length === 0 ? '(no key)' : list.map(step).join(' -> ');
const followUps = (list: ReplayFollowUp[]) =>
  list.length === 0
    ? '(none)'
    : list
        .map((f) => `${f.type} ${f.text === null ? '(no text)' : JSON.stringify(f.text)}`)
        .join('; ');

/** One differing call as lines of text: where the path parts, the outcome, the follow-ups. */
export function formatReplayedCall(call: ReplayedCall): string {
  const lines = [
    `${call.id} (${call.createdAt}, ${call.lang}, version ${call.flowVersion}) keys ${call.inputs.join(',') || '(none)'}`,
  ];
  if (call.path) {
    const { partsAt } = call.path;
    lines.push(
      `  path parts at step ${partsAt.step}: was ${step(partsAt.before)}, would be ${step(partsAt.after)}`,
      `    was      ${steps(call.path.before)}`,
      `    would be ${steps(call.path.after)}`,
    );
  }
  if (call.outcome) {
    lines.push(
      `  outcome: was ${call.outcome.before ?? '(none)'}, would be ${call.outcome.after ?? '(none)'}`,
    );
  }
  if (call.followUps) {
    lines.push(
      `  follow-ups: was ${followUps(call.followUps.before)}`,
      `              would be ${followUps(call.followUps.after)}`,
    );
  }
  if (call.menuDifferences) {
    lines.push(
      `  the changed flow's machine and menu disagree: ${call.menuDifferences.join('; ')}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

const counts = (map: Record<string, number>) =>
  Object.entries(map)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ') || '-';

/** A replay report as text: each differing call, each skipped one, then the totals. */
export function formatReplayReport(report: FlowReplayReport): string {
  let out = '';
  for (const call of report.items.slice(0, SHOWN)) out += formatReplayedCall(call);
  if (report.differing > Math.min(SHOWN, report.items.length)) {
    out += `... and ${report.differing - Math.min(SHOWN, report.items.length)} more differing calls (--json lists up to ${report.items.length})\n`;
  }
  if (report.skippedCalls.length > 0) {
    out += 'skipped:\n';
    for (const s of report.skippedCalls.slice(0, SHOWN)) {
      out += `  ${s.id} ${s.reason}: ${s.message}\n`;
    }
    if (report.skipped > Math.min(SHOWN, report.skippedCalls.length)) {
      out += `  ... and ${report.skipped - Math.min(SHOWN, report.skippedCalls.length)} more\n`;
    }
  }
  const reasons = Object.entries(report.skippedBy)
    .filter(([, n]) => n > 0)
    .map(([r, n]) => `${r} ${n}`)
    .join(', ');
  const by = report.differingBy;
  out +=
    `${report.calls} call${report.calls === 1 ? '' : 's'} since ${report.since}${report.until ? ` until ${report.until}` : ''}` +
    ` through version ${report.version}: ${report.replayed} replayed, ${report.same} same, ` +
    `${report.differing} differ (path ${by.path}, outcome ${by.outcome}, follow-ups ${by.followUps}), ` +
    `${report.skipped} skipped${reasons ? ` (${reasons})` : ''}\n`;
  out += `outcomes: was ${counts(report.outcomes.before)}; would be ${counts(report.outcomes.after)}\n`;
  if (report.menuMismatches > 0) {
    out += `${report.menuMismatches} calls on which the changed flow's machine and menu disagree\n`;
  }
  if (report.limited) out += '--limit stopped the replay before the end of the period\n';
  return out;
}

/**
 * The server's refusal as lines; a draft's errors name the file given (the server compiles it
 * as `flows/<id>.yaml`), so they read `changed.yaml:12:5 ...`.
 */
function refusal(body: unknown, id: string, file: string): string {
  const e = (body as ErrorAnswer | undefined)?.error;
  if (!e) return `${JSON.stringify(body)}\n`;
  const asFiled = `flows/${id}.yaml:`;
  const details = (e.details ?? []).map((d) => {
    const message = d.message.startsWith(asFiled)
      ? `${file}:${d.message.slice(asFiled.length)}`
      : `${d.path}: ${d.message}`;
    return `  ${message}\n`;
  });
  return `${e.code}: ${e.message}\n${details.join('')}`;
}

/**
 * Runs `flows replay`; `argv` follows the word `replay`.
 *
 * @example
 * const code = await runFlowsReplay(['appointment-reminder', '--file', 'changed.yaml', '--url', url], io);
 */
export async function runFlowsReplay(argv: string[], io: FlowsReplayIo): Promise<number> {
  const err = (text: string) => io.stderr.write(text);
  let f: ReturnType<typeof flags>['values'];
  let positionals: string[];
  try {
    ({ values: f, positionals } = flags(argv));
  } catch (e) {
    err(`switchboard flows replay: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (f.help) {
    io.stdout.write(USAGE);
    return 0;
  }
  const { baseUrl, headers } = switchboardTarget(f, io.env ?? process.env);
  try {
    if (positionals.length !== 1) throw new UsageError('name one flow: flows replay <id> ...');
    const id = positionals[0]!;
    if (!f.file)
      throw new UsageError('--file is required: the changed flow to replay calls through');
    let limit: number | undefined;
    if (f.limit !== undefined) {
      if (!/^[1-9]\d{0,6}$/.test(f.limit) || Number(f.limit) > 1_000_000) {
        throw new UsageError('--limit must be a whole number from 1 to 1000000');
      }
      limit = Number(f.limit);
    }
    const path = resolve(io.cwd, f.file);
    const shown = relative(io.cwd, path) || path;
    let source: string;
    try {
      source = await readFile(path, 'utf8');
    } catch (e) {
      throw new UsageError(`cannot read --file ${shown}: ${(e as Error).message}`);
    }
    const transport = createTransport({ baseUrl, headers, timeoutMs: 600_000 });
    let report: FlowReplayReport;
    try {
      const res = await transport.request({
        method: 'POST',
        path: `/v1/flows/${encodeURIComponent(id)}/replay`,
        json: {
          source,
          since: f.since ?? '7d',
          ...(f.until !== undefined && { until: f.until }),
          ...(limit !== undefined && { limit }),
        },
        retry: false,
      });
      report = res.json as FlowReplayReport;
    } catch (e) {
      if (!(e instanceof ProviderError)) throw e;
      if (e.kind === 'network')
        err(`switchboard flows replay: ${unreachable(baseUrl, e.message)}\n`);
      else err(`switchboard flows replay: ${refusal(e.body, id, shown)}`);
      return 2;
    }
    io.stdout.write(f.json ? `${JSON.stringify(report, null, 2)}\n` : formatReplayReport(report));
    return report.differing > 0 ? 1 : 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err(`switchboard flows replay: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    throw e;
  }
}
