/**
 * `switchboard send`: one message from flags, or many from a JSON, JSON Lines or CSV file,
 * posted to a running Switchboard (`POST /v1/messages`, at most 5000 per request) or, with
 * `--direct`, straight to the provider through the provider client.
 *
 * Exit codes: 0 every message queued; 2 some were rejected (listed); 1 nothing could be
 * sent (bad flags or file, server unreachable, refused credentials).
 *
 * @example
 * switchboard send --to +380501234567 --from Acme --type sms --text "Hi"
 * switchboard send --file reminders.csv --from Acme --type sms
 */
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseCsv } from 'csv-parse/sync';
import { chunk, createProviderClient, type ProviderAuth } from '../provider/client.ts';
import { createTransport, ProviderError } from '../provider/http.ts';
import {
  MAX_MESSAGES_PER_LIST,
  type Message,
  type NormalisedMessagelistResponse,
  validateMessage,
} from '../provider/message.ts';
import { SANDBOX_TOKEN_HEADER } from '../sandbox/access.ts';
import { switchboardTarget, unreachable } from './io.ts';
import { createProgress, type Progress } from './progress.ts';

export interface SendIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: Record<string, string | undefined>;
}

const SHOWN_REJECTIONS = 10;

const HELP = `Usage:
  switchboard send --to <E.164> --from <sender> [--type sms] [--text <text>] [options]
  switchboard send --file <messages.json|.jsonl|.csv> [--from <sender>] [--type <type>] [options]

Message flags (for one message, or defaults for every message of a file):
  --to, --from, --type (default sms), --text, --customer-message-id,
  --dt-send <ISO 8601>, --dt-expire <ISO 8601>, --ttl <seconds>,
  --message-data <JSON>, --menu <JSON> (speechcall), --fallback <JSON object>
  (one, as the provider's docs write it) or --fallbacks <JSON array>
  Types: sms, viber_trans (or viber_service), viber_promo, viber_carousel, viber_survey,
  viber_otp, viber_session, rcs, flashcall, flashcall_callback, speechcall, and cascade
  (one message through the cascade API, not with --direct): --message-type
  transaction|promo|viber_survey|flashcall, --survey-options <JSON array>,
  --variables <JSON array of {id, type, value}>

Files: JSON (an array of messages, or {"messages": [...]}), JSON Lines, or CSV with a
header row of field names; messageData, menu, fallback(s), surveyOptions and variables
cells hold JSON, and dotted headers build objects (messageData.templateId). Empty cells
are left out.

Options:
  --url <url>        Switchboard to post to (default $SWITCHBOARD_URL, else http://$HOST:$PORT,
                     localhost:3000 when unset)
  --token <token>    bearer token for /v1 (default $API_TOKEN)
  --direct           send straight to the provider ($PROVIDER_BASE_URL with
                     $PROVIDER_LOGIN/$PROVIDER_PASSWORD or $PROVIDER_API_KEY; to a
                     sandbox on another host, $SANDBOX_TOKEN is sent as X-Sandbox-Token)
  --batch-size <n>   messages per request (default and maximum 5000)
  --progress / --no-progress   force the progress bar on or off
  --json             print every result as JSON on stdout
  -h, --help

Exit codes: 0 all queued, 2 some rejected, 1 nothing sent.
`;

/** One message's outcome, in input order. */
export interface SendResult {
  index: number;
  to?: string;
  status: 'queued' | 'rejected';
  id?: string;
  customerMessageId?: string;
  parts?: number;
  error?: { code: string; message: string };
}

class UsageError extends Error {}

/**
 * Runs `switchboard send`; returns the exit code.
 *
 * @example
 * const code = await runSend(['--to', '+380501234567', '--text', 'hi', '--from', 'Acme'], { stdout, stderr, env: process.env });
 */
export async function runSend(argv: string[], io: SendIo): Promise<number> {
  let flags: ReturnType<typeof parseFlags>;
  try {
    flags = parseFlags(argv);
  } catch (e) {
    io.stderr.write(`switchboard send: ${(e as Error).message}\n\n${HELP}`);
    return 1;
  }
  if (flags.values.help) {
    io.stdout.write(HELP);
    return 0;
  }
  let progress: Progress | undefined;
  try {
    const messages = await loadMessages(flags.values);
    if (messages.length === 0) throw new UsageError('no messages to send');
    const batch = batchSize(flags.values['batch-size']);
    progress = progressFor(messages.length, flags.values, io.stderr);
    const outcome = flags.values.direct
      ? await sendDirect(messages, batch, io.env, progress)
      : await sendToSwitchboard(messages, batch, flags.values, io.env, progress);
    progress.stop();
    const where = flags.values.direct ? 'the provider' : target(flags.values, io.env);
    const code = report(outcome.results, messages.length, where, flags.values.json === true, io);
    if (outcome.fatal === undefined) return code;
    io.stderr.write(
      `switchboard send: stopped after ${outcome.results.length} of ${messages.length}: ${describe(outcome.fatal)}\n`,
    );
    return 1;
  } catch (e) {
    progress?.stop();
    const message =
      e instanceof UsageError
        ? `${e.message}\n\nRun switchboard send --help for usage.`
        : describe(e);
    io.stderr.write(`switchboard send: ${message}\n`);
    return 1;
  }
}

/** What a sender got through, and the error that stopped it, if one did. */
interface Outcome {
  results: SendResult[];
  fatal?: unknown;
}

function parseFlags(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: false,
    allowNegative: true,
    options: {
      to: { type: 'string' },
      from: { type: 'string' },
      type: { type: 'string' },
      text: { type: 'string' },
      'customer-message-id': { type: 'string' },
      'dt-send': { type: 'string' },
      'dt-expire': { type: 'string' },
      ttl: { type: 'string' },
      'message-data': { type: 'string' },
      menu: { type: 'string' },
      fallbacks: { type: 'string' },
      fallback: { type: 'string' },
      'message-type': { type: 'string' },
      'survey-options': { type: 'string' },
      variables: { type: 'string' },
      file: { type: 'string', short: 'f' },
      url: { type: 'string' },
      token: { type: 'string' },
      direct: { type: 'boolean' },
      'batch-size': { type: 'string' },
      progress: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

type Flags = ReturnType<typeof parseFlags>['values'];

function batchSize(value: string | undefined): number {
  if (value === undefined) return MAX_MESSAGES_PER_LIST;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_MESSAGES_PER_LIST) {
    throw new UsageError(`--batch-size must be a whole number from 1 to ${MAX_MESSAGES_PER_LIST}`);
  }
  return n;
}

function json(value: string, what: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    throw new UsageError(`${what} is not valid JSON`);
  }
}

/** Fields given by flags: the one message, or defaults for each message of a file. */
function flagFields(f: Flags): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const set = (k: string, v: unknown) => {
    if (v !== undefined) out[k] = v;
  };
  set('from', f.from);
  set('to', f.to);
  set('type', f.type);
  set('text', f.text);
  set('customerMessageId', f['customer-message-id']);
  set('dtSend', f['dt-send']);
  set('dtExpire', f['dt-expire']);
  if (f.ttl !== undefined) {
    if (!/^\d+$/.test(f.ttl)) throw new UsageError('--ttl must be a whole number of seconds');
    out.ttl = Number(f.ttl);
  }
  if (f['message-data'] !== undefined) out.messageData = json(f['message-data'], '--message-data');
  if (f.menu !== undefined) out.menu = json(f.menu, '--menu');
  if (f.fallbacks !== undefined) out.fallbacks = json(f.fallbacks, '--fallbacks');
  if (f.fallback !== undefined) out.fallback = json(f.fallback, '--fallback');
  set('messageType', f['message-type']);
  if (f['survey-options'] !== undefined)
    out.surveyOptions = json(f['survey-options'], '--survey-options');
  if (f.variables !== undefined) out.variables = json(f.variables, '--variables');
  return out;
}

async function loadMessages(f: Flags): Promise<unknown[]> {
  const fields = flagFields(f);
  if (f.file === undefined) {
    if (fields.to === undefined) throw new UsageError('give --to (and --from, --text), or --file');
    return [{ type: 'sms', ...fields }];
  }
  let text: string;
  try {
    text = await readFile(f.file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${f.file}: ${(e as Error).message}`);
  }
  const rows = parseFile(f.file, text);
  // Flags fill in what a row leaves out; a row's own value wins.
  return rows.map((row) =>
    row && typeof row === 'object' && !Array.isArray(row)
      ? { type: 'sms', ...fields, ...row }
      : row,
  );
}

/** Parses a messages file by extension (content sniffed when the extension says nothing). */
export function parseFile(name: string, text: string): unknown[] {
  const ext = extname(name).toLowerCase();
  const body = text.replace(/^\uFEFF/, '');
  if (ext === '.csv') return parseCsvMessages(body);
  if (ext === '.jsonl' || ext === '.ndjson') return parseJsonLines(body);
  const trimmed = body.trim();
  if (ext === '.json' || trimmed.startsWith('[') || trimmed.startsWith('{')) {
    let data: unknown;
    try {
      data = JSON.parse(trimmed);
    } catch {
      if (ext !== '.json') return parseJsonLines(body);
      throw new UsageError(`${name} is not valid JSON`);
    }
    if (Array.isArray(data)) return data;
    if (
      data &&
      typeof data === 'object' &&
      Array.isArray((data as { messages?: unknown }).messages)
    ) {
      return (data as { messages: unknown[] }).messages;
    }
    if (data && typeof data === 'object') return [data];
    throw new UsageError(`${name}: expected an array of messages or {"messages": [...]}`);
  }
  return parseCsvMessages(body);
}

function parseJsonLines(text: string): unknown[] {
  return text
    .split(/\r?\n/)
    .map((line, i) => [line.trim(), i + 1] as const)
    .filter(([line]) => line !== '')
    .map(([line, n]) => json(line, `line ${n}`));
}

const JSON_COLUMNS = new Set([
  'messageData',
  'menu',
  'fallbacks',
  'fallback',
  'surveyOptions',
  'variables',
]);

function parseCsvMessages(text: string): unknown[] {
  let rows: Array<Record<string, string>>;
  try {
    rows = parseCsv(text, {
      columns: true,
      skip_empty_lines: true,
      trim: true,
      bom: true,
      // hand-written lists hold quotes inside text (Hello "Ann"); take them as they are
      relax_quotes: true,
    });
  } catch (e) {
    throw new UsageError(`CSV: ${(e as Error).message}`);
  }
  return rows.map((row, i) => {
    const msg: Record<string, unknown> = {};
    for (const [column, raw] of Object.entries(row)) {
      if (raw === '') continue;
      const path = column.split('.');
      const top = path[0] ?? column;
      let value: unknown = raw;
      const jsonCell = JSON_COLUMNS.has(top) && (path.length === 1 || /^[[{]/.test(raw));
      if (jsonCell) value = json(raw, `row ${i + 2}, column ${column}`);
      else if (column === 'ttl' && /^\d+$/.test(raw)) value = Number(raw);
      setPath(msg, path, value);
    }
    return msg;
  });
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  path.forEach((key, i) => {
    if (i === path.length - 1) {
      node[key] = value;
      return;
    }
    const next = node[key];
    if (!next || typeof next !== 'object') node[key] = {};
    node = node[key] as Record<string, unknown>;
  });
}

function progressFor(total: number, f: Flags, stderr: NodeJS.WritableStream): Progress {
  return createProgress(total, { stderr, unit: 'messages', show: f.progress });
}

function target(f: Flags, env: Record<string, string | undefined>): string {
  return switchboardTarget(f, env).baseUrl;
}

interface ApiResult {
  id?: string;
  customerMessageId?: string;
  status: string;
  parts?: number;
  error?: { code?: string; message?: string };
}

async function sendToSwitchboard(
  messages: unknown[],
  size: number,
  f: Flags,
  env: Record<string, string | undefined>,
  progress: Progress,
): Promise<Outcome> {
  const { baseUrl, headers } = switchboardTarget(f, env);
  const transport = createTransport({ baseUrl, headers, timeoutMs: 120_000 });
  const results: SendResult[] = [];
  let offset = 0;
  for (const part of chunk(messages, size)) {
    try {
      results.push(...(await postChunk(transport, part, offset, baseUrl)));
    } catch (fatal) {
      if (results.length === 0) throw fatal;
      return { results, fatal };
    }
    offset += part.length;
    progress.advance(part.length);
  }
  return { results };
}

async function postChunk(
  transport: ReturnType<typeof createTransport>,
  part: unknown[],
  offset: number,
  baseUrl: string,
): Promise<SendResult[]> {
  const toOf = (i: number) => {
    const m = part[i] as { to?: unknown } | undefined;
    return typeof m?.to === 'string' ? m.to : undefined;
  };
  for (let attempt = 1; ; attempt++) {
    try {
      // 429s are retried by the transport; a 500 is not, since it may have stored the list.
      const res = await transport.request({
        method: 'POST',
        path: '/v1/messages',
        json: { messages: part },
        retry: false,
      });
      const body = res.json as { messages?: ApiResult[] } | undefined;
      if (!Array.isArray(body?.messages)) {
        throw new Error(`unexpected answer from ${baseUrl}/v1/messages: ${res.text.slice(0, 200)}`);
      }
      return body.messages.map((r, i) => toResult(r, offset + i, toOf(i)));
    } catch (e) {
      if (!(e instanceof ProviderError)) throw e;
      // 503: the server stored nothing (its rule), so the list can go again.
      if (e.status === 503 && attempt < 4) {
        await new Promise((r) => setTimeout(r, 500 * attempt));
        continue;
      }
      if (e.status === 400) return rejectedChunk(e.body, part.length, offset, toOf);
      if (e.kind === 'network') throw new Error(unreachable(baseUrl, e.message));
      if (e.kind === 'unauthorized')
        throw new Error(`${baseUrl} refused the token: set --token or API_TOKEN`);
      throw e;
    }
  }
}

function toResult(r: ApiResult, index: number, to: string | undefined): SendResult {
  const out: SendResult = { index, status: r.status === 'queued' ? 'queued' : 'rejected' };
  if (to !== undefined) out.to = to;
  if (r.id !== undefined) out.id = r.id;
  if (r.customerMessageId !== undefined) out.customerMessageId = r.customerMessageId;
  if (r.parts !== undefined) out.parts = r.parts;
  if (out.status === 'rejected') {
    out.error = { code: r.error?.code ?? 'REJECTED', message: r.error?.message ?? r.status };
  }
  return out;
}

/** A 400 for the whole request: each message rejected with the details naming it. */
function rejectedChunk(
  body: unknown,
  count: number,
  offset: number,
  toOf: (i: number) => string | undefined,
): SendResult[] {
  const envelope = (
    body as {
      error?: {
        code?: string;
        message?: string;
        details?: Array<{ path?: string; code?: string; message?: string }>;
      };
    }
  )?.error;
  const top = {
    code: envelope?.code ?? 'BAD_REQUEST',
    message: envelope?.message ?? 'request refused',
  };
  const perMessage = new Map<number, { code: string; message: string }>();
  for (const d of envelope?.details ?? []) {
    const m = /^messages\[(\d+)\]\.?(.*)$/.exec(d.path ?? '');
    if (!m || perMessage.has(Number(m[1]))) continue;
    perMessage.set(Number(m[1]), {
      code: d.code ?? top.code,
      message: m[2] ? `${m[2]}: ${d.message ?? ''}` : (d.message ?? top.message),
    });
  }
  return Array.from({ length: count }, (_, i) => {
    const r: SendResult = {
      index: offset + i,
      status: 'rejected',
      error: perMessage.get(i) ?? top,
    };
    const to = toOf(i);
    if (to !== undefined) r.to = to;
    return r;
  });
}

async function sendDirect(
  messages: unknown[],
  size: number,
  env: Record<string, string | undefined>,
  progress: Progress,
): Promise<Outcome> {
  const baseUrl = env.PROVIDER_BASE_URL?.trim();
  if (!baseUrl) throw new UsageError('--direct needs PROVIDER_BASE_URL (the provider address)');
  let auth: ProviderAuth;
  if (env.PROVIDER_LOGIN?.trim() && env.PROVIDER_PASSWORD !== undefined) {
    auth = { login: env.PROVIDER_LOGIN.trim(), password: env.PROVIDER_PASSWORD };
  } else if (env.PROVIDER_API_KEY?.trim()) {
    auth = { apiKey: env.PROVIDER_API_KEY.trim() };
  } else {
    throw new UsageError(
      '--direct needs PROVIDER_LOGIN and PROVIDER_PASSWORD, or PROVIDER_API_KEY',
    );
  }
  // a sandbox on another host answers only with its token
  const sandboxToken = env.SANDBOX_TOKEN?.trim();
  const client = createProviderClient({
    baseUrl,
    auth,
    ...(sandboxToken && { extraHeaders: { [SANDBOX_TOKEN_HEADER]: sandboxToken } }),
  });
  const maxSmsParts =
    env.MAX_SMS_PARTS && /^\d+$/.test(env.MAX_SMS_PARTS) ? Number(env.MAX_SMS_PARTS) : undefined;

  const results: SendResult[] = new Array(messages.length);
  const valid: Array<{ index: number; message: Message; parts?: number }> = [];
  messages.forEach((input, index) => {
    const to = (input as { to?: unknown } | null)?.to;
    const v = validateMessage(input, maxSmsParts === undefined ? {} : { maxSmsParts });
    if (v.ok)
      valid.push({
        index,
        message: v.message,
        ...(v.parts === undefined ? {} : { parts: v.parts }),
      });
    else {
      results[index] = {
        index,
        status: 'rejected',
        error: { code: v.error.code, message: v.error.message },
      };
      if (typeof to === 'string') results[index].to = to;
      progress.advance(1);
    }
  });
  for (const part of chunk(valid, size)) {
    let response: NormalisedMessagelistResponse | undefined;
    try {
      [response] = await client.sendMessagelist(part.map((p) => p.message));
    } catch (fatal) {
      return { results: results.filter((r) => r !== undefined), fatal };
    }
    part.forEach((p, i) => {
      const r = response?.messages[i];
      const out: SendResult = {
        index: p.index,
        to: p.message.to,
        status: r?.accepted ? 'queued' : 'rejected',
      };
      if (r?.messageId !== undefined) out.id = r.messageId;
      if (p.message.customerMessageId !== undefined)
        out.customerMessageId = p.message.customerMessageId;
      const parts = r?.parts ?? p.parts;
      if (parts !== undefined) out.parts = parts;
      if (out.status === 'rejected') {
        out.error = r?.error
          ? { code: r.error.code ?? 'REJECTED', message: r.error.message }
          : {
              code: 'REJECTED',
              message: r ? `provider status ${r.status}` : 'no result from the provider',
            };
      }
      results[p.index] = out;
    });
    progress.advance(part.length);
  }
  return { results };
}

function report(
  results: SendResult[],
  total: number,
  where: string,
  asJson: boolean,
  io: SendIo,
): number {
  const rejected = results.filter((r) => r.status === 'rejected');
  const queued = results.length - rejected.length;
  if (asJson) {
    const unsent = total - results.length;
    io.stdout.write(
      `${JSON.stringify({ queued, rejected: rejected.length, unsent, results }, null, 2)}\n`,
    );
  } else {
    const noun = results.length === 1 ? 'message' : 'messages';
    io.stdout.write(
      `Sent ${results.length} ${noun} to ${where}: ${queued} accepted, ${rejected.length} rejected.\n`,
    );
    if (results.length === 1 && queued === 1 && results[0]?.id) {
      io.stdout.write(
        `id ${results[0].id}${results[0].parts ? `, ${results[0].parts} SMS part(s)` : ''}\n`,
      );
    }
    if (rejected.length > 0) {
      const shown = rejected.slice(0, SHOWN_REJECTIONS);
      io.stdout.write(
        `Rejected${rejected.length > shown.length ? ` (first ${shown.length} of ${rejected.length})` : ''}:\n`,
      );
      for (const r of shown) {
        io.stdout.write(
          `  #${r.index + 1}${r.to ? ` ${r.to}` : ''}: ${r.error?.code} ${r.error?.message}\n`,
        );
      }
    }
  }
  return rejected.length === 0 ? 0 : 2;
}

function describe(e: unknown): string {
  if (e instanceof ProviderError)
    return `${e.message}${e.kind === 'unauthorized' ? ' (check the provider credentials)' : ''}`;
  return e instanceof Error ? e.message : String(e);
}
