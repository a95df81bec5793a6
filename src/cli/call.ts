/**
 * `switchboard call`: start one call from a flow (`POST /v1/calls`), or thousands from a CSV
 * file (`POST /v1/calls/batch`), against a running Switchboard.
 *
 * CSV: a `to` column, an optional `lang` column, and one column per flow param (or
 * `vars.<param>`); `--var k=v` sets a var for every row.
 *
 * Exit codes: 0 every call queued (and, with --wait, ended); 2 some were rejected or the call
 * failed; 1 nothing could be started (bad flags or file, server unreachable, refused).
 *
 * @example
 * switchboard call appointment-reminder --to +380501234567 --from Clinic --var name=Ann --var "date=Monday 10:00" --wait
 * switchboard call appointment-reminder --file patients.csv --from Clinic
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parse as parseCsv } from 'csv-parse/sync';
import { readTextVars } from '../flows/vars.ts';
import { createTransport, ProviderError } from '../provider/http.ts';
import {
  type CliIo,
  describeError,
  type ErrorAnswer,
  switchboardTarget,
  unreachable,
} from './io.ts';
import { createProgress } from './progress.ts';

const HELP = `Usage:
  switchboard call <flow> --to <E.164> --from <sender> [--var k=v ...] [--lang xx] [--wait]
  switchboard call <flow> --file calls.csv --from <sender> [--var k=v ...] [--lang xx]

Options:
  --url <base>       Switchboard's address (default $SWITCHBOARD_URL, else http://$HOST:$PORT,
                     localhost:3000 when unset)
  --token <token>    API token (default: the first of API_TOKEN)
  --wait             wait for a single call to end and print its path and outcome
  --batch-size <n>   calls per /v1/calls/batch request (default 1000, at most 10000)
  --[no-]progress    force the progress bar on or off
  --json             print the API's answers as JSON
`;

const SHOWN_REJECTIONS = 10;

function flags(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    allowNegative: true,
    options: {
      to: { type: 'string' },
      from: { type: 'string' },
      var: { type: 'string', multiple: true },
      lang: { type: 'string' },
      file: { type: 'string', short: 'f' },
      url: { type: 'string' },
      token: { type: 'string' },
      wait: { type: 'boolean' },
      'batch-size': { type: 'string' },
      progress: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

class UsageError extends Error {}

function parseVars(pairs: string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs ?? []) {
    const eq = pair.indexOf('=');
    if (eq < 1) throw new UsageError(`--var "${pair}" must be name=value`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

/** CSV rows as batch items: `to`, `lang`, and every other column a var. */
export function callsFromCsv(text: string, vars: Record<string, string>) {
  const rows = parseCsv(text, {
    columns: true,
    skip_empty_lines: true,
    trim: true,
    bom: true,
  }) as Record<string, string>[];
  return rows.map((row, i) => {
    const { to, lang, ...rest } = row;
    if (!to) throw new UsageError(`row ${i + 2}: the "to" column is empty`);
    const rowVars: Record<string, string> = { ...vars };
    for (const [k, v] of Object.entries(rest)) {
      if (v !== '') rowVars[k.replace(/^vars\./, '')] = v;
    }
    return { to, vars: rowVars, ...(lang && { lang }) };
  });
}

export async function runCall(argv: string[], io: CliIo): Promise<number> {
  let f: ReturnType<typeof flags>['values'];
  let positionals: string[];
  try {
    ({ values: f, positionals } = flags(argv));
  } catch (e) {
    io.stderr.write(`switchboard call: ${(e as Error).message}\n\n${HELP}`);
    return 1;
  }
  if (f.help) {
    io.stdout.write(HELP);
    return 0;
  }
  const [flow] = positionals;
  const { baseUrl: base, headers } = switchboardTarget(f, io.env);
  const transport = createTransport({ baseUrl: base, headers, timeoutMs: 120_000 });
  try {
    if (!flow) throw new UsageError('name the flow: switchboard call <flow> ...');
    if (!f.from) throw new UsageError('--from is required (the sender the provider shows)');
    const vars = parseVars(f.var);
    // --var values and CSV cells are text: each read by its param's type (the API's are JSON)
    const params = await flowParams(transport, flow);
    if (f.file) {
      if (f.to) throw new UsageError('give either --to or --file, not both');
      const calls = callsFromCsv(await readFile(f.file, 'utf8'), vars).map((c) => ({
        ...c,
        vars: readTextVars(params, c.vars),
      }));
      return await batch(io, transport, { flow, from: f.from, lang: f.lang, calls }, f);
    }
    if (!f.to) throw new UsageError('--to (or --file) is required');
    const res = await transport.request({
      method: 'POST',
      path: '/v1/calls',
      json: {
        flow,
        to: f.to,
        from: f.from,
        vars: readTextVars(params, vars),
        ...(f.lang && { lang: f.lang }),
      },
      retry: false,
    });
    const started = res.json as { id: string; flowVersion: string };
    io.stdout.write(
      f.json
        ? `${JSON.stringify(started)}\n`
        : `call ${started.id} queued (${flow}@${started.flowVersion})\n`,
    );
    if (!f.wait) return 0;
    return await waitFor(io, transport, started.id, f.json === true);
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr.write(`switchboard call: ${e.message}\n\n${HELP}`);
      return 1;
    }
    if (e instanceof ProviderError) {
      if (e.kind === 'network') {
        io.stderr.write(`switchboard call: ${unreachable(base, e.message)}\n`);
      } else {
        io.stderr.write(`switchboard call: ${describeError(e.body)}\n`);
      }
      return e.status === 400 ? 2 : 1;
    }
    io.stderr.write(`switchboard call: ${(e as Error).message}\n`);
    return 1;
  }
}

/**
 * The flow's params with their types (GET /v1/flows/{id}); none when it cannot be read (an
 * unknown flow, a token without `read`): the vars then go as text, for the API to judge.
 */
async function flowParams(
  transport: ReturnType<typeof createTransport>,
  flow: string,
): Promise<Record<string, { type: string }>> {
  try {
    const res = await transport.request({
      method: 'GET',
      path: `/v1/flows/${encodeURIComponent(flow)}`,
      retry: false,
    });
    return (res.json as { params?: Record<string, { type: string }> }).params ?? {};
  } catch (e) {
    if (e instanceof ProviderError && e.kind !== 'network') return {};
    throw e;
  }
}

async function waitFor(
  io: CliIo,
  transport: ReturnType<typeof createTransport>,
  id: string,
  json: boolean,
): Promise<number> {
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const call = (await transport.request({ method: 'GET', path: `/v1/calls/${id}` })).json as {
      state: string;
      outcome: string | null;
      path: { menu: string; key: string }[];
      messages: { role: string; type: string; status: string }[];
    };
    if (call.state === 'ended' || call.state === 'failed' || Date.now() > deadline) {
      if (json) io.stdout.write(`${JSON.stringify(call)}\n`);
      else {
        const path = call.path.map((p) => `${p.menu}:${p.key}`).join(' -> ') || '(no keys)';
        const followUps = call.messages
          .filter((m) => m.role === 'follow-up')
          .map((m) => `${m.type} ${m.status}`)
          .join(', ');
        io.stdout.write(
          `state ${call.state}, outcome ${call.outcome ?? '-'}\npath ${path}\nfollow-ups ${followUps || '-'}\n`,
        );
      }
      return call.state === 'ended' ? 0 : 2;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function batch(
  io: CliIo,
  transport: ReturnType<typeof createTransport>,
  request: {
    flow: string;
    from: string;
    lang?: string | undefined;
    calls: { to: string; vars: Record<string, unknown> }[];
  },
  f: {
    'batch-size'?: string | undefined;
    progress?: boolean | undefined;
    json?: boolean | undefined;
  },
): Promise<number> {
  const size = Number(f['batch-size'] ?? 1000);
  if (!Number.isInteger(size) || size < 1 || size > 10_000) {
    throw new UsageError('--batch-size must be a whole number from 1 to 10000');
  }
  const progress = createProgress(request.calls.length, {
    stderr: io.stderr,
    unit: 'calls',
    verb: 'starting',
    show: f.progress,
  });
  let queued = 0;
  const rejected: { index: number; to: string; error: string }[] = [];
  try {
    for (let start = 0; start < request.calls.length; start += size) {
      const part = request.calls.slice(start, start + size);
      let results: { status: string; error?: ErrorAnswer['error'] }[];
      try {
        const res = await transport.request({
          method: 'POST',
          path: '/v1/calls/batch',
          json: {
            flow: request.flow,
            from: request.from,
            ...(request.lang && { lang: request.lang }),
            calls: part,
          },
          retry: false,
        });
        results = (res.json as { calls: typeof results }).calls;
      } catch (e) {
        // a chunk with not one valid call is a 400 whose details name each rejected call
        if (!(e instanceof ProviderError) || e.status !== 400) throw e;
        const error = (e.body as ErrorAnswer).error;
        results = part.map((_, i) => {
          const mine = (error?.details ?? []).filter((d) => d.path.startsWith(`calls[${i}]`));
          const first = mine[0];
          return {
            status: 'rejected',
            error: first
              ? { code: error?.code, message: `${first.path}: ${first.message}`, details: mine }
              : error,
          };
        });
      }
      results.forEach((r, i) => {
        if (r.status === 'queued') queued++;
        else
          rejected.push({
            index: start + i,
            to: part[i]!.to,
            error: describeError({ error: r.error }),
          });
      });
      progress.advance(part.length);
    }
  } finally {
    progress.stop();
  }
  if (f.json) io.stdout.write(`${JSON.stringify({ queued, rejected })}\n`);
  else {
    io.stdout.write(
      `${queued} of ${request.calls.length} calls queued, ${rejected.length} rejected\n`,
    );
    for (const r of rejected.slice(0, SHOWN_REJECTIONS)) {
      io.stdout.write(`  row ${r.index + 2} (${r.to}): ${r.error.split('\n')[0]}\n`);
    }
    if (rejected.length > SHOWN_REJECTIONS)
      io.stdout.write(`  ... and ${rejected.length - SHOWN_REJECTIONS} more\n`);
  }
  return rejected.length === 0 ? 0 : queued === 0 ? 1 : 2;
}
