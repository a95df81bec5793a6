/**
 * Accepting a campaign: what it sends checked (a flow, or a message template), then each
 * recipient (the number; for a flow the language and the vars against its params; for a
 * message the template filled with the row's vars, checked as `POST /v1/messages` checks a
 * message), a bad row reported by its row and field while the good ones go, a number listed
 * twice kept once. A JSON campaign and a CSV one are stored by the same writer
 * (`storeCampaign`): in one transaction when their recipients fit one batch, else a batch a
 * transaction, as `uploading` until all of them are in (src/campaigns/uploads.ts). Nothing is
 * prepared per call here: a recipient costs a row, and its call or message is built when the
 * scheduler releases it (src/campaigns/scheduler.ts).
 */

import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { parse as parseCsv } from 'csv-parse';
import { and, eq, sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import type { FlowRegistry } from '../calls/registry.ts';
import { startableFlow } from '../calls/start-prepare.ts';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf, type Tx } from '../db/client.ts';
import { campaignRecipients, campaigns } from '../db/schema/index.ts';
import { AppError, type ErrorCode, type ErrorDetail } from '../errors.ts';
import { type CompiledFlow, readTextVars, validateVars } from '../flows/index.ts';
import type { CampaignRetryPolicy } from '../flows/schema.ts';
import { malformedTemplate, templateNames, walkStrings } from '../flows/template.ts';
import { uuidv7 } from '../ids.ts';
import type { Logger } from '../logger.ts';
import { checkMessageInput } from '../messages/submit.ts';
import { isE164 } from '../provider/message.ts';
import { issuesToDetails } from '../zod-issues.ts';
import { campaignMessage, startingPace } from './scheduler.ts';
import {
  CampaignRecipientInput,
  type CampaignState,
  type CreateCampaignRequest,
  NO_RETRY,
} from './schemas.ts';
import { withSpooledUpload } from './spool.ts';
import { deleteUpload, UPLOAD_ROWS_PER_TRANSACTION } from './uploads.ts';
import type { CallingWindow } from './windows.ts';

export interface CampaignDeps {
  db: Db;
  clock: Clock;
  flows: FlowRegistry;
  /** the most SMS parts a message campaign's message may take (MAX_SMS_PARTS) */
  maxSmsParts?: number;
}

/**
 * What a campaign gives each recipient: a call of a flow, or a message filled from a template
 * (the `{{names}}` its strings use, each required in every recipient's vars).
 */
export type CampaignTarget =
  | {
      kind: 'flow';
      compiled: CompiledFlow;
      /** the flow's `campaign.retry`: the campaign's when it gives none */
      retry: CampaignRetryPolicy | undefined;
    }
  | { kind: 'message'; template: Record<string, unknown>; names: readonly string[] };

/** The fields a message campaign sets per recipient, not in its template. */
const SET_PER_RECIPIENT = ['to', 'from', 'customerMessageId'] as const;

function invalid(message: string, details: ErrorDetail[]): AppError {
  return new AppError('VALIDATION_ERROR', message, details);
}

/**
 * The campaign's flow or message template, checked: exactly one of them; a template without
 * the fields set per recipient, with well-formed `{{names}}`, and valid as a message once
 * filled (checked here when it has no names, per row otherwise); a message campaign retries
 * on `failed` only and has no language.
 */
export async function campaignTarget(
  deps: CampaignDeps,
  input: Pick<CreateCampaignRequest, 'flow' | 'message' | 'lang' | 'retry' | 'from'>,
  /** where the settings came from, before each path: `query.` for a CSV upload's */
  at = '',
): Promise<CampaignTarget> {
  try {
    return await checkTarget(deps, input);
  } catch (err) {
    if (!at || !(err instanceof AppError)) throw err;
    const details = err.details.map((d) => ({ ...d, path: `${at}${d.path}` }));
    throw new AppError(err.code, err.message, details);
  }
}

async function checkTarget(
  deps: CampaignDeps,
  input: Pick<CreateCampaignRequest, 'flow' | 'message' | 'lang' | 'retry' | 'from'>,
): Promise<CampaignTarget> {
  if (input.flow !== undefined && input.message !== undefined) {
    throw invalid('give either flow or message, not both', [
      { path: 'message', code: 'CONFLICTING_FIELDS', message: 'not allowed together with flow' },
    ]);
  }
  if (input.message === undefined) {
    if (input.flow === undefined) {
      throw invalid('flow or message is required', [
        {
          path: 'flow',
          code: 'REQUIRED',
          message: 'required: the flow to call with, or a message template in message',
        },
      ]);
    }
    const flow = await startableFlow(deps, input.flow, 'flow');
    checkLanguage(flow.compiled, input.lang);
    return { kind: 'flow', compiled: flow.compiled, retry: flow.definition?.campaign?.retry };
  }
  const template = input.message;
  const details: ErrorDetail[] = [];
  for (const field of SET_PER_RECIPIENT) {
    if (field in template) {
      details.push({
        path: `message.${field}`,
        code: 'CONFLICTING_FIELDS',
        message:
          field === 'to'
            ? "set by the campaign: each recipient's number"
            : field === 'from'
              ? 'set by the campaign: its `from`'
              : 'set by the campaign: each message gets its own',
      });
    }
  }
  if (input.lang !== undefined) {
    details.push({
      path: 'lang',
      code: 'CONFLICTING_FIELDS',
      message: 'a message campaign has one template: lang applies to flows only',
    });
  }
  (input.retry?.on ?? []).forEach((on, i) => {
    if (on !== 'failed') {
      details.push({
        path: `retry.on[${i}]`,
        code: 'INVALID_VALUE',
        message: 'a message campaign retries on `failed` only (rejected, failed or expired)',
      });
    }
  });
  const names = new Set<string>();
  for (const { path, text } of walkStrings(template, ['message'])) {
    for (const name of templateNames(text)) names.add(name);
    const bad = malformedTemplate(text);
    if (bad !== null) {
      details.push({
        path: path.join('.'),
        code: 'TEMPLATE_SYNTAX',
        message: `"${bad}" is not a {{name}} template`,
      });
    }
  }
  if (details.length > 0) throw invalid(`${details[0]!.path}: ${details[0]!.message}`, details);
  if (names.size === 0) {
    // nothing to fill: the template is the message, checked once for every row
    const checked = checkMessageInput(
      { ...template, to: EXAMPLE_NUMBER, from: input.from },
      messageOptions(deps),
      deps.clock.now(),
    );
    if (!checked.ok) {
      // one code for a bad template (its details keep the rule each field broke)
      throw new AppError(
        'INVALID_MESSAGE',
        `message: ${checked.error.message}`,
        checked.error.details.map((d) => ({
          ...d,
          path: d.path ? `message.${d.path}` : 'message',
        })),
      );
    }
  }
  return { kind: 'message', template, names: [...names] };
}

/** A valid number to check a template with no names against (the rows bring their own). */
const EXAMPLE_NUMBER = '+380501234567';

function messageOptions(deps: Pick<CampaignDeps, 'maxSmsParts'>) {
  return deps.maxSmsParts !== undefined ? { maxSmsParts: deps.maxSmsParts } : {};
}

export interface RowProblem {
  row: number;
  code: string;
  message: string;
  details: ErrorDetail[];
}

/** A recipient that passed its checks, ready to store. */
export interface CheckedRecipient {
  line: number;
  phone: string;
  vars: Record<string, unknown>;
  lang: string | null;
}

/**
 * One recipient checked against what the campaign sends; `where` names the row in messages
 * (`recipients[3]` or `line 4`).
 */
export function checkRecipient(
  deps: Pick<CampaignDeps, 'clock' | 'maxSmsParts'>,
  target: CampaignTarget,
  from: string,
  raw: unknown,
  row: number,
  where: string,
  defaultLang: string | undefined,
): { ok: CheckedRecipient } | { problem: RowProblem } {
  const problem = (code: ErrorCode, details: ErrorDetail[]): { problem: RowProblem } => ({
    problem: {
      row,
      code,
      message: details[0] ? `${details[0].path}: ${details[0].message}` : `${where}: invalid`,
      details,
    },
  });
  const parsed = CampaignRecipientInput.safeParse(raw);
  if (!parsed.success) {
    return problem('VALIDATION_ERROR', issuesToDetails(parsed.error.issues, [where]));
  }
  const { to, vars, lang } = parsed.data;
  if (!isE164(to)) {
    return problem('INVALID_RECIPIENT', [
      {
        path: `${where}.to`,
        code: 'INVALID_RECIPIENT',
        message: 'must be a valid phone number in E.164, such as +380501234567',
      },
    ]);
  }
  if (target.kind === 'message') {
    if (lang !== undefined) {
      return problem('VALIDATION_ERROR', [
        {
          path: `${where}.lang`,
          code: 'UNKNOWN_FIELD',
          message: 'a message campaign has one template: lang applies to flows only',
        },
      ]);
    }
    const given = vars ?? {};
    const missing = target.names.filter((n) => given[n] === undefined || given[n] === null);
    if (missing.length > 0) {
      return problem(
        'INVALID_VARS',
        missing.map((n) => ({
          path: `${where}.vars.${n}`,
          code: 'REQUIRED',
          message: `required: the message template uses {{${n}}}`,
        })),
      );
    }
    if (target.names.length > 0) {
      const checked = checkMessageInput(
        campaignMessage(target.template, to, from, given),
        messageOptions(deps),
        deps.clock.now(),
      );
      if (!checked.ok) {
        return problem(
          checked.error.code,
          checked.error.details.map((d) => ({
            ...d,
            path: d.path ? `${where}.message.${d.path}` : `${where}.message`,
          })),
        );
      }
    }
    return { ok: { line: row, phone: to, vars: given, lang: null } };
  }
  const compiled = target.compiled;
  const language = lang ?? defaultLang;
  if (language !== undefined && !compiled.languages.includes(language)) {
    return problem('INVALID_LANGUAGE', [
      {
        path: `${where}.lang`,
        code: 'UNKNOWN_LANGUAGE',
        message: `must be one of the flow's languages: ${compiled.languages.join(', ')}`,
      },
    ]);
  }
  const checked = validateVars(compiled, vars ?? {});
  if (!checked.ok) {
    return problem(
      'INVALID_VARS',
      checked.details.map((d) => ({ ...d, path: `${where}.${d.path}` })),
    );
  }
  return { ok: { line: row, phone: to, vars: checked.vars, lang: lang ?? null } };
}

export interface CreateOutcome {
  id: string;
  accepted: number;
  duplicates: number;
  /** the first `REJECTED_LISTED` rows refused */
  rejected: RowProblem[];
  /** every row refused */
  rejectedCount: number;
}

/** What a request brings besides its campaign: its end, and its log. */
export interface CampaignRequest {
  /** aborted when the request ends (the client gone, the server stopping): the upload stops */
  signal?: AbortSignal | undefined;
  /** where a server-side failure (a temporary directory it cannot write) is logged */
  logger?: Pick<Logger, 'warn'> | undefined;
}

/** POST /v1/campaigns with JSON recipients. */
export async function createCampaign(
  deps: CampaignDeps,
  input: CreateCampaignRequest,
  request: CampaignRequest = {},
): Promise<CreateOutcome> {
  const target = await campaignTarget(deps, input);
  return storeCampaign(deps, input, target, () => jsonRecipients(input.recipients), request);
}

/** A JSON campaign's recipients, by their index. */
function* jsonRecipients(recipients: readonly unknown[]): Generator<RawRecipient> {
  for (const [row, raw] of recipients.entries()) yield { raw, row, where: `recipients[${row}]` };
}

type CampaignSettings = Omit<CreateCampaignRequest, 'recipients'>;

async function insertCampaign(
  tx: Tx,
  upload: Upload,
  target: CampaignTarget,
  input: CampaignSettings,
): Promise<void> {
  await tx.insert(campaigns).values({
    id: upload.id,
    name: input.name ?? null,
    flowId: target.kind === 'flow' ? target.compiled.id : null,
    message: target.kind === 'message' ? target.template : null,
    from: input.from,
    lang: input.lang ?? null,
    // its batches make it `scheduled` with their last (src/campaigns/uploads.ts)
    state: 'uploading' satisfies CampaignState,
    startAt: upload.startAt,
    perMinute: input.perMinute ?? 60,
    maxConcurrent: input.maxConcurrent ?? null,
    window: (input.window ?? null) satisfies CallingWindow | null,
    // the campaign's own, else its flow's `campaign.retry`, else one attempt
    retry: (input.retry ??
      (target.kind === 'flow' ? target.retry : undefined) ??
      NO_RETRY) satisfies CampaignRetryPolicy,
    pacedAt: startingPace(upload.startAt, input.perMinute ?? 60),
    recipients: 0,
    createdAt: upload.touched,
    updatedAt: upload.touched,
  });
}

/**
 * Stores recipients in one statement, their rows one JSON parameter read by
 * `jsonb_to_recordset`: a multi-row insert's eight parameters a row cost several times more on
 * both engines, PGlite most (test/campaigns/recipients-insert.test.ts holds it to that insert).
 * A number the campaign has already, or that comes twice, is kept once: its first line.
 * Answers how many were new.
 */
export async function insertRecipients(
  tx: Tx,
  id: string,
  rows: readonly CheckedRecipient[],
  startAt: Date,
  now: Date,
): Promise<number> {
  if (rows.length === 0) return 0;
  const t = campaignRecipients;
  const c = (column: AnyPgColumn) => sql.identifier(column.name);
  const values = JSON.stringify(
    rows.map(({ line, phone, vars, lang }) => ({ line, phone, vars, lang })),
  );
  const result = await tx.execute(sql`
    with stored as (
      insert into ${t} (${c(t.campaignId)}, ${c(t.line)}, ${c(t.phone)}, ${c(t.vars)}, ${c(t.lang)},
        ${c(t.state)}, ${c(t.nextAt)}, ${c(t.updatedAt)})
      select ${id}::uuid, r.line, r.phone, r.vars, r.lang,
        'pending', ${startAt.toISOString()}::timestamptz, ${now.toISOString()}::timestamptz
      from rows from (
        jsonb_to_recordset(${values}::jsonb) as (line int, phone text, vars jsonb, lang text)
      ) with ordinality as r(line, phone, vars, lang, ord)
      order by r.ord
      on conflict (${c(t.campaignId)}, ${c(t.phone)}) do nothing
      returning 1
    )
    select count(*)::int as n from stored`);
  return rowsOf<{ n: number }>(result)[0]!.n;
}

/** Rows refused are listed up to this many (the rest counted): a bad file of a million lines
 * is answered in a page, not in a million details. */
export const REJECTED_LISTED = 1000;

/**
 * POST /v1/campaigns with a CSV body: the settings from the query (checked before the body is
 * read), the body then read whole to a temporary file (src/campaigns/spool.ts: a slow upload
 * holds no database connection), and the recipients streamed from that file (a header row:
 * `to`, optional `lang`, every other column a var, `vars.` prefix allowed) into `storeCampaign`,
 * so a file of a million rows is never held in memory, nor the database for all of it. Cells
 * are read by their param's type (`readTextVars`), as `switchboard call --file` reads them.
 */
export async function createCampaignFromCsv(
  deps: CampaignDeps,
  input: CampaignSettings,
  body: AsyncIterable<Uint8Array>,
  request: CampaignRequest = {},
): Promise<CreateOutcome> {
  const target = await campaignTarget(deps, input, 'query.');
  return withSpooledUpload(
    body,
    (file) =>
      storeCampaign(
        deps,
        input,
        target,
        (refuse) => csvRecipients(target, createReadStream(file), refuse),
        request,
      ),
    request.logger,
  );
}

/**
 * A CSV body's recipients, by their line; a line that is not a row of the header's columns
 * (an unclosed quote, a wrong number of cells) is refused as it is read.
 */
async function* csvRecipients(
  target: CampaignTarget,
  body: AsyncIterable<Uint8Array>,
  refuse: (problem: RowProblem) => void,
): AsyncGenerator<RawRecipient> {
  const parser = parseCsv({
    columns: (header: string[]) => header.map((h) => h.trim().replace(/^vars\./, '')),
    skip_empty_lines: true,
    trim: true,
    bom: true,
    info: true,
    skip_records_with_error: true,
  });
  parser.on('skip', (err: { message: string; lines?: number }) => {
    const line = err.lines ?? 0;
    refuse({
      row: line,
      code: 'VALIDATION_ERROR',
      message: `line ${line}: ${err.message}`,
      details: [{ path: `line ${line}`, code: 'INVALID_CSV', message: err.message }],
    });
  });
  // ends the feed when the rows are no longer read (a failed batch): the file is closed
  const fed = new AbortController();
  const feed = (async () => {
    try {
      for await (const chunk of body) {
        if (!parser.write(chunk)) await once(parser, 'drain', { signal: fed.signal });
      }
      parser.end();
    } catch (err) {
      parser.destroy(err instanceof Error ? err : new Error(String(err)));
    }
  })();
  try {
    for await (const { record, info } of parser as AsyncIterable<{
      record: Record<string, string>;
      info: { lines: number };
    }>) {
      yield { raw: csvRecipient(target, record), row: info.lines, where: `line ${info.lines}` };
    }
    await feed;
  } finally {
    fed.abort();
  }
}

/** A recipient as its request gives it, before its checks: its row, and how messages name it. */
interface RawRecipient {
  raw: unknown;
  /** its index in a JSON body, its line in a CSV one */
  row: number;
  /** `recipients[3]`, `line 4` */
  where: string;
}

/**
 * A campaign's recipients, read once, in order; a row refused before it is a recipient (a CSV
 * line that is not a row) is told to `refuse`.
 */
type RecipientSource = (
  refuse: (problem: RowProblem) => void,
) => Iterable<RawRecipient> | AsyncIterable<RawRecipient>;

/** A campaign being stored: its row's id and start, and what the upload last wrote of it. */
interface Upload {
  id: string;
  startAt: Date;
  /** its `updated_at` as this upload last wrote it (src/campaigns/uploads.ts) */
  touched: Date;
  /** its recipients stored so far */
  stored: number;
}

/**
 * The campaign and its recipients, each checked as it is read from `recipients`. Recipients of
 * one batch (`UPLOAD_ROWS_PER_TRANSACTION`) go in one transaction with the campaign, which is
 * `scheduled` from that commit. More are an upload: the campaign's row is committed first, as
 * `uploading`, then its recipients a batch a transaction (`recipients` is not read meanwhile),
 * the last making it `scheduled` (src/campaigns/uploads.ts). A number listed twice is kept once
 * (the unique index decides, so no set of numbers grows in memory). A failure after the
 * campaign's row is in, or `request.signal` aborted (the client gone, the server stopping),
 * deletes it with its recipients (best effort: else the sweep does), so a retry stores the
 * campaign once.
 */
async function storeCampaign(
  deps: CampaignDeps,
  input: CampaignSettings,
  target: CampaignTarget,
  recipients: RecipientSource,
  request: CampaignRequest,
): Promise<CreateOutcome> {
  const now = deps.clock.now();
  const upload: Upload = {
    id: uuidv7(now.getTime()),
    startAt: input.startAt ? new Date(input.startAt) : now,
    touched: now,
    stored: 0,
  };
  const rejected: RowProblem[] = [];
  let rejectedCount = 0;
  let checked = 0;
  const refuse = (problem: RowProblem) => {
    rejectedCount++;
    if (rejected.length < REJECTED_LISTED) rejected.push(problem);
  };
  const insert = (tx: Tx) => insertCampaign(tx, upload, target, input);
  let inserted = false;
  try {
    let batch: CheckedRecipient[] = [];
    for await (const { raw, row, where } of recipients(refuse)) {
      const r = checkRecipient(deps, target, input.from, raw, row, where, input.lang);
      if ('problem' in r) {
        refuse(r.problem);
        continue;
      }
      if (batch.length === UPLOAD_ROWS_PER_TRANSACTION) {
        // more than a batch: an upload, its campaign `uploading` until the last is in
        if (!inserted) await deps.db.transaction(insert);
        inserted = true;
        await storeUploadBatch(deps, upload, batch, request.signal);
        batch = [];
      }
      checked++;
      batch.push(r.ok);
    }
    // the last batch, and the campaign whole: runnable from this commit (with its row, when
    // all of it is this batch)
    await storeUploadBatch(deps, upload, batch, request.signal, inserted ? 'last' : insert);
  } catch (err) {
    // best effort: what is left stays `uploading`, never started, and the sweep deletes it
    if (inserted) await deleteUpload(deps.db, upload.id).catch(() => {});
    throw err;
  }
  // a good row not stored had a number listed before it
  const { id, stored } = upload;
  return { id, accepted: stored, duplicates: checked - stored, rejected, rejectedCount };
}

/**
 * One transaction of an upload: `rows` stored, and its campaign's count of recipients and
 * `updated_at` written on condition that the campaign is as the upload last left it
 * (src/campaigns/uploads.ts); with `last`, the campaign `scheduled` too, and inserted first in
 * the same transaction when `last` is how to insert it.
 */
async function storeUploadBatch(
  deps: CampaignDeps,
  upload: Upload,
  rows: readonly CheckedRecipient[],
  signal: AbortSignal | undefined,
  last?: 'last' | ((tx: Tx) => Promise<void>),
): Promise<void> {
  if (signal?.aborted) {
    throw new AppError(
      'UNAVAILABLE',
      'the upload was not stored: its request ended first (the client left, or the server is stopping)',
    );
  }
  const now = deps.clock.now();
  upload.stored = await deps.db.transaction(async (tx) => {
    if (typeof last === 'function') await last(tx);
    const n = upload.stored + (await insertRecipients(tx, upload.id, rows, upload.startAt, now));
    const [held] = await tx
      .update(campaigns)
      .set({ recipients: n, updatedAt: now, ...(last && { state: 'scheduled' as const }) })
      .where(
        and(
          eq(campaigns.id, upload.id),
          eq(campaigns.state, 'uploading'),
          eq(campaigns.updatedAt, upload.touched),
        ),
      )
      .returning({ id: campaigns.id });
    // taken by the stale-upload sweep (or deleted): this transaction's rows go with it
    if (!held) throw abandonedUpload();
    return n;
  });
  upload.touched = now;
}

/**
 * What an upload answers when the sweep took its campaign: it went untouched past
 * `STALE_UPLOAD_MS` between two of its transactions (the database held that long, the process
 * paused), was deleted as left behind, and is to be sent again.
 */
function abandonedUpload(): AppError {
  return new AppError(
    'CONFLICT',
    'the upload was abandoned and removed: it stalled between two of its batches for longer than an unfinished upload is kept, and its campaign was deleted with what was stored of it; send it again',
  );
}

/**
 * A CSV row as a recipient: `to`, and every other non-empty cell a var (read by its param's
 * type for a flow; as text for a message, where `lang` is a var like any other).
 */
function csvRecipient(target: CampaignTarget, record: Record<string, string>) {
  const { to, ...cells } = record;
  const text: Record<string, string> = {};
  for (const [k, v] of Object.entries(cells)) if (v !== '') text[k] = v;
  if (target.kind === 'message') return { to, vars: text };
  const { lang, ...rest } = text;
  return { to, vars: readTextVars(target.compiled.params, rest), ...(lang && { lang }) };
}

function checkLanguage(compiled: CompiledFlow, lang: string | undefined): void {
  if (lang !== undefined && !compiled.languages.includes(lang)) {
    throw new AppError('INVALID_LANGUAGE', `flow "${compiled.id}" has no language "${lang}"`, [
      {
        path: 'lang',
        code: 'UNKNOWN_LANGUAGE',
        message: `must be one of ${compiled.languages.join(', ')}`,
      },
    ]);
  }
}
