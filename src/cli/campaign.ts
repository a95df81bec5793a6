/**
 * `switchboard campaign`: create a campaign (a flow's calls, or a message) from a CSV file, follow it, pause, resume or
 * cancel it, and export its results, through a running Switchboard's API (docs/campaigns.md).
 *
 * `create` streams the file as the `text/csv` body of POST /v1/campaigns (the settings go in
 * the query), so a file of a million rows is never read whole; `export` streams the results
 * CSV to a file or stdout the same way.
 *
 * Exit codes: 0 done; 2 created with some rows rejected, or the campaign was cancelled while
 * waiting; 1 nothing done (bad flags or file, server unreachable, refused).
 *
 * @example
 * switchboard campaign create appointment-reminder --from Clinic --file patients.csv --per-minute 120
 * switchboard campaign create --message '{"type":"sms","text":"Hi {{name}}"}' --from Shop --file list.csv
 * switchboard campaign status 019a... --wait
 * switchboard campaign export 019a... --out results.csv
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { OPEN_RECIPIENT_STATES, RECIPIENT_STATES } from '../campaigns/schemas.ts';
import { createTransport, kindForStatus, ProviderError } from '../provider/http.ts';
import { type CliIo, describeError, switchboardTarget, unreachable } from './io.ts';

const HELP = `Usage:
  switchboard campaign create <flow> --from <sender> --file recipients.csv [options]
  switchboard campaign create --message '<json>' --from <sender> --file recipients.csv [options]
  switchboard campaign status <id> [--wait] [--json]
  switchboard campaign pause|resume|cancel <id>
  switchboard campaign export <id> [--out results.csv]

Options of create (docs/campaigns.md):
  --message <json>          send this message instead of calling with a flow: a message as
                            POST /v1/messages takes it, without to and from, its {{names}}
                            filled from each row, e.g. '{"type":"sms","text":"Hi {{name}}"}'
  --name <text>             a name to know it by
  --lang <xx>               the recipients' default language (a flow campaign's)
  --start-at <ISO time>     no call starts before it (default: now)
  --per-minute <n>          calls started per minute at most (default 60)
  --max-concurrent <n>      calls in progress at once at most
  --window "09:00-20:00 mon-fri"   when calls may start, in each recipient's time zone
  --retry-on failed,no-input --retry-after 2h --max-attempts 3   try again

Common options:
  --url <base>       Switchboard's address (default $SWITCHBOARD_URL, else http://$HOST:$PORT,
                     localhost:3000 when unset)
  --token <token>    API token (default: the first of API_TOKEN)
  --json             print the API's answers as JSON
  --[no-]progress    with status --wait: force the progress bar on or off (default: on a terminal)
`;

const SHOWN_REJECTIONS = 10;
/** Recipients that will not be called again. */
const FINAL = RECIPIENT_STATES.filter((s) => !OPEN_RECIPIENT_STATES.includes(s));

function flags(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    allowNegative: true,
    options: {
      from: { type: 'string' },
      message: { type: 'string' },
      file: { type: 'string', short: 'f' },
      name: { type: 'string' },
      lang: { type: 'string' },
      'start-at': { type: 'string' },
      'per-minute': { type: 'string' },
      'max-concurrent': { type: 'string' },
      window: { type: 'string' },
      'retry-on': { type: 'string' },
      'retry-after': { type: 'string' },
      'max-attempts': { type: 'string' },
      out: { type: 'string', short: 'o' },
      wait: { type: 'boolean' },
      progress: { type: 'boolean' },
      url: { type: 'string' },
      token: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
type Flags = ReturnType<typeof flags>['values'];

class UsageError extends Error {}

interface CampaignView {
  id: string;
  name: string | null;
  flow: string | null;
  message: { type?: unknown } | null;
  state: string;
  recipients: number;
  startAt: string;
  progress: {
    byState: Record<string, number>;
    byOutcome: Record<string, number>;
    attempts: number;
  };
}

interface Target {
  base: string;
  headers: Record<string, string>;
  transport: ReturnType<typeof createTransport>;
}

/** The query of a CSV upload from the flags (src/http/routes/campaigns.ts CsvSettings). */
export function csvQuery(flow: string | undefined, f: Flags): URLSearchParams {
  const q = new URLSearchParams({ from: f.from ?? '' });
  const pairs: [string, string | undefined][] = [
    ['flow', flow],
    ['message', f.message],
    ['name', f.name],
    ['lang', f.lang],
    ['startAt', f['start-at']],
    ['perMinute', f['per-minute']],
    ['maxConcurrent', f['max-concurrent']],
    ['window', f.window],
    ['retryOn', f['retry-on']],
    ['retryAfter', f['retry-after']],
    ['maxAttempts', f['max-attempts']],
  ];
  for (const [k, v] of pairs) if (v !== undefined) q.set(k, v);
  return q;
}

/** "7 of 10 done": recipients that will not be called again, of all. */
function finished(c: CampaignView): number {
  return FINAL.reduce((n, s) => n + (c.progress.byState[s] ?? 0), 0);
}

export function describeCampaign(c: CampaignView): string {
  const byState = RECIPIENT_STATES.filter((s) => (c.progress.byState[s] ?? 0) > 0)
    .map((s) => `${s} ${c.progress.byState[s]}`)
    .join(', ');
  const byOutcome = Object.entries(c.progress.byOutcome)
    .sort((a, b) => b[1] - a[1])
    .map(([o, n]) => `${o} ${n}`)
    .join(', ');
  return [
    `campaign ${c.id}${c.name ? ` (${c.name})` : ''}: ${c.state}, ${c.flow !== null ? `flow ${c.flow}` : `message ${String(c.message?.type ?? '')}`}`,
    `progress ${finished(c)} of ${c.recipients} done, ${c.progress.attempts} ${c.flow !== null ? 'calls made' : 'messages sent'}`,
    `recipients ${byState || '-'}`,
    `outcomes ${byOutcome || '-'}`,
  ].join('\n');
}

async function getCampaign(t: Target, id: string): Promise<CampaignView> {
  const res = await t.transport.request({
    method: 'GET',
    path: `/v1/campaigns/${encodeURIComponent(id)}`,
  });
  return res.json as CampaignView;
}

/** A fetch that streams (the transport reads whole bodies); its errors as the transport's. */
async function streamingFetch(t: Target, path: string, init: RequestInit): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(`${t.base}${path}`, {
      ...init,
      headers: { ...t.headers, ...(init.headers as Record<string, string>) },
    });
  } catch (cause) {
    const reason = cause instanceof Error ? (cause.cause as Error)?.message || cause.message : '';
    throw new ProviderError('network', reason || String(cause), { cause });
  }
  if (res.ok) return res;
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text is the answer
  }
  throw new ProviderError(kindForStatus(res.status), `HTTP ${res.status}`, {
    status: res.status,
    body,
  });
}

async function create(io: CliIo, t: Target, flow: string | undefined, f: Flags) {
  if (!flow && f.message === undefined) {
    throw new UsageError(
      "name the flow (switchboard campaign create <flow> ...) or give --message '<json>'",
    );
  }
  if (!f.from) throw new UsageError('--from is required (the caller id)');
  if (!f.file) throw new UsageError('--file is required (a CSV with a "to" column)');
  const file = f.file;
  await stat(file).catch(() => {
    throw new UsageError(`cannot read ${file}`);
  });
  const body = Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
  const res = await streamingFetch(t, `/v1/campaigns?${csvQuery(flow, f)}`, {
    method: 'POST',
    headers: { 'content-type': 'text/csv', accept: 'application/json' },
    body,
    duplex: 'half', // a stream body goes as it is read
  } as RequestInit);
  const made = (await res.json()) as CampaignView & {
    accepted: number;
    duplicates: number;
    rejected: { row: number; code: string; message: string }[];
    rejectedCount: number;
  };
  if (f.json) io.stdout.write(`${JSON.stringify(made)}\n`);
  else {
    io.stdout.write(
      `campaign ${made.id} ${made.state}: ${made.accepted} recipients accepted, ${made.duplicates} duplicates, ${made.rejectedCount} rejected\n`,
    );
    for (const r of made.rejected.slice(0, SHOWN_REJECTIONS)) {
      // the message names its line and field already (`line 4.to: ...`)
      io.stdout.write(`  ${r.message}\n`);
    }
    if (made.rejectedCount > SHOWN_REJECTIONS) {
      io.stdout.write(`  ... and ${made.rejectedCount - SHOWN_REJECTIONS} more\n`);
    }
  }
  return made.rejectedCount === 0 ? 0 : 2;
}

async function status(io: CliIo, t: Target, id: string, f: Flags) {
  let campaign = await getCampaign(t, id);
  if (f.wait) {
    const isTty = (io.stderr as { isTTY?: boolean }).isTTY === true;
    const bar =
      (f.progress ?? isTty)
        ? new cliProgress.SingleBar(
            {
              stream: io.stderr,
              format: `campaign {state} [{bar}] {percentage}% | {value}/{total} done | {duration_formatted}`,
              noTTYOutput: true,
              gracefulExit: false,
              hideCursor: isTty,
            },
            cliProgress.Presets.shades_classic,
          )
        : undefined;
    bar?.start(Math.max(campaign.recipients, 1), finished(campaign), { state: campaign.state });
    try {
      while (campaign.state !== 'done' && campaign.state !== 'cancelled') {
        await new Promise((r) => setTimeout(r, 1000));
        campaign = await getCampaign(t, id);
        bar?.update(finished(campaign), { state: campaign.state });
      }
    } finally {
      bar?.stop();
    }
  }
  io.stdout.write(f.json ? `${JSON.stringify(campaign)}\n` : `${describeCampaign(campaign)}\n`);
  return f.wait && campaign.state === 'cancelled' ? 2 : 0;
}

async function change(io: CliIo, t: Target, id: string, action: string, f: Flags) {
  const res = await t.transport.request({
    method: 'POST',
    path: `/v1/campaigns/${encodeURIComponent(id)}/${action}`,
    retry: false,
  });
  const campaign = res.json as CampaignView;
  io.stdout.write(
    f.json ? `${JSON.stringify(campaign)}\n` : `campaign ${campaign.id} ${campaign.state}\n`,
  );
  return 0;
}

async function exportResults(io: CliIo, t: Target, id: string, f: Flags) {
  const res = await streamingFetch(t, `/v1/campaigns/${encodeURIComponent(id)}/results`, {
    headers: { accept: 'text/csv' },
  });
  if (!res.body) throw new Error('the answer has no body');
  // stdout stays open after the copy: only a file is ended
  const sink = f.out
    ? createWriteStream(f.out)
    : new Writable({
        write(chunk, _enc, done) {
          io.stdout.write(chunk, done);
        },
      });
  await pipeline(Readable.fromWeb(res.body as WebReadableStream), sink);
  if (f.out) io.stderr.write(`results of campaign ${id} written to ${f.out}\n`);
  return 0;
}

export async function runCampaign(argv: string[], io: CliIo): Promise<number> {
  let f: Flags;
  let positionals: string[];
  try {
    ({ values: f, positionals } = flags(argv));
  } catch (e) {
    io.stderr.write(`switchboard campaign: ${(e as Error).message}\n\n${HELP}`);
    return 1;
  }
  const [sub, arg] = positionals;
  if (f.help || sub === 'help') {
    io.stdout.write(HELP);
    return 0;
  }
  const { baseUrl: base, headers } = switchboardTarget(f, io.env);
  const t: Target = {
    base,
    headers,
    transport: createTransport({ baseUrl: base, headers, timeoutMs: 120_000 }),
  };
  try {
    if (sub === 'create') return await create(io, t, arg, f);
    if (!['status', 'pause', 'resume', 'cancel', 'export'].includes(sub ?? '')) {
      throw new UsageError(sub ? `unknown subcommand "${sub}"` : 'name a subcommand');
    }
    if (!arg) throw new UsageError(`name the campaign: switchboard campaign ${sub} <id>`);
    if (sub === 'status') return await status(io, t, arg, f);
    if (sub === 'export') return await exportResults(io, t, arg, f);
    return await change(io, t, arg, sub!, f);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`switchboard campaign: ${e.message}\n\n${HELP}`);
      return 1;
    }
    if (e instanceof ProviderError) {
      io.stderr.write(
        `switchboard campaign: ${e.kind === 'network' ? unreachable(base, e.message) : describeError(e.body)}\n`,
      );
      return 1;
    }
    io.stderr.write(`switchboard campaign: ${(e as Error).message}\n`);
    return 1;
  }
}
