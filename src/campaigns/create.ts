/**
 * Accepting a campaign: what it sends checked (a flow, or a message template), then each
 * recipient (the number; for a flow the language and the vars against its params; for a
 * message the template filled with the row's vars, checked as `POST /v1/messages` checks a
 * message), a bad row reported by its row and field while the good ones go, a number listed
 * twice kept once. A JSON campaign is stored in one transaction; a CSV one in several, as
 * `uploading` until all of it is in (src/campaigns/uploads.ts). Nothing is prepared per call
 * here: a recipient costs a row, and its call or message is built when the scheduler releases
 * it (src/campaigns/scheduler.ts).
 */

import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { parse as parseCsv } from 'csv-parse';
import { and, eq } from 'drizzle-orm';
import type { FlowRegistry } from '../calls/registry.ts';
import { startableFlow } from '../calls/start-prepare.ts';
import type { Clock } from '../clock.ts';
import type { Db, Tx } from '../db/client.ts';
import { campaignRecipients, campaigns } from '../db/schema/index.ts';
import { AppError, type ErrorCode, type ErrorDetail } from '../errors.ts';
import { type CompiledFlow, readTextVars, validateVars } from '../flows/index.ts';
import type { CampaignRetryPolicy } from '../flows/schema.ts';
import { malformedTemplate, templateNames, walkStrings } from '../flows/template.ts';
import { uuidv7 } from '../ids.ts';
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
  rejected: RowProblem[];
}

/** POST /v1/campaigns with JSON recipients. */
export async function createCampaign(
  deps: CampaignDeps,
  input: CreateCampaignRequest,
): Promise<CreateOutcome> {
  const target = await campaignTarget(deps, input);
  const rejected: RowProblem[] = [];
  const rows: CheckedRecipient[] = [];
  const seen = new Set<string>();
  let duplicates = 0;
  input.recipients.forEach((raw, i) => {
    const r = checkRecipient(deps, target, input.from, raw, i, `recipients[${i}]`, input.lang);
    if ('problem' in r) rejected.push(r.problem);
    else if (seen.has(r.ok.phone)) duplicates++;
    else {
      seen.add(r.ok.phone);
      rows.push(r.ok);
    }
  });
  const now = deps.clock.now();
  const id = uuidv7(now.getTime());
  await deps.db.transaction(async (tx) => {
    const startAt = await insertCampaign(tx, id, target, input, rows.length, now, 'scheduled');
    await insertRecipients(tx, id, rows, startAt, now);
  });
  return { id, accepted: rows.length, duplicates, rejected };
}

type CampaignSettings = Omit<CreateCampaignRequest, 'recipients'>;

async function insertCampaign(
  tx: Tx,
  id: string,
  target: CampaignTarget,
  input: CampaignSettings,
  recipients: number,
  now: Date,
  state: Extract<CampaignState, 'scheduled' | 'uploading'>,
): Promise<Date> {
  const startAt = input.startAt ? new Date(input.startAt) : now;
  await tx.insert(campaigns).values({
    id,
    name: input.name ?? null,
    flowId: target.kind === 'flow' ? target.compiled.id : null,
    message: target.kind === 'message' ? target.template : null,
    from: input.from,
    lang: input.lang ?? null,
    state,
    startAt,
    perMinute: input.perMinute ?? 60,
    maxConcurrent: input.maxConcurrent ?? null,
    window: (input.window ?? null) satisfies CallingWindow | null,
    // the campaign's own, else its flow's `campaign.retry`, else one attempt
    retry: (input.retry ??
      (target.kind === 'flow' ? target.retry : undefined) ??
      NO_RETRY) satisfies CampaignRetryPolicy,
    pacedAt: startingPace(startAt, input.perMinute ?? 60),
    recipients,
    createdAt: now,
    updatedAt: now,
  });
  return startAt;
}

/** Recipients inserted per statement. */
const RECIPIENTS_PER_INSERT = 1000;

/**
 * Stores recipients, `RECIPIENTS_PER_INSERT` a statement; a number the campaign has already is
 * kept once. Answers how many were new.
 */
async function insertRecipients(
  tx: Tx,
  id: string,
  rows: readonly CheckedRecipient[],
  startAt: Date,
  now: Date,
): Promise<number> {
  let stored = 0;
  for (let i = 0; i < rows.length; i += RECIPIENTS_PER_INSERT) {
    stored += await insertChunk(tx, id, rows.slice(i, i + RECIPIENTS_PER_INSERT), startAt, now);
  }
  return stored;
}

async function insertChunk(
  tx: Tx,
  id: string,
  rows: readonly CheckedRecipient[],
  startAt: Date,
  now: Date,
): Promise<number> {
  const stored = await tx
    .insert(campaignRecipients)
    .values(
      rows.map((r) => ({
        campaignId: id,
        line: r.line,
        phone: r.phone,
        vars: r.vars,
        lang: r.lang,
        state: 'pending',
        nextAt: startAt,
        updatedAt: now,
      })),
    )
    .onConflictDoNothing({ target: [campaignRecipients.campaignId, campaignRecipients.phone] })
    .returning({ id: campaignRecipients.id });
  return stored.length;
}

/** Rows refused are listed up to this many (the rest counted): a bad file of a million lines
 * is answered in a page, not in a million details. */
export const REJECTED_LISTED = 1000;

/**
 * POST /v1/campaigns with a CSV body: the settings from the query (checked before the body is
 * read), the body then read whole to a temporary file (src/campaigns/spool.ts: a slow upload
 * holds no database connection), and the recipients streamed from that file (a header row:
 * `to`, optional `lang`, every other column a var, `vars.` prefix allowed), checked and stored
 * `UPLOAD_ROWS_PER_TRANSACTION` a transaction (src/campaigns/uploads.ts), so a file of a
 * million rows is never held in memory, nor the database for all of it. Cells are read by
 * their param's type (`readTextVars`), as `switchboard call --file` reads them; a number listed
 * twice is kept once (the unique index decides, so no set of numbers grows in memory).
 * `signal` aborted (the client gone, the server stopping) stops the upload at its next
 * transaction, undone.
 */
export async function createCampaignFromCsv(
  deps: CampaignDeps,
  input: CampaignSettings,
  body: AsyncIterable<Uint8Array>,
  signal?: AbortSignal,
): Promise<CreateOutcome & { rejectedCount: number }> {
  const target = await campaignTarget(deps, input, 'query.');
  return withSpooledUpload(body, (file) =>
    storeCsvCampaign(deps, input, target, createReadStream(file), signal),
  );
}

/**
 * The campaign and its recipients from `body` (all of it at hand): the campaign `uploading`,
 * its recipients a batch a transaction, then `scheduled`. A failure after the campaign's row
 * is in deletes it with its recipients (best effort: else the sweep does), so a retry stores
 * the campaign once.
 */
async function storeCsvCampaign(
  deps: CampaignDeps,
  input: CampaignSettings,
  target: CampaignTarget,
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal | undefined,
): Promise<CreateOutcome & { rejectedCount: number }> {
  const now = deps.clock.now();
  const id = uuidv7(now.getTime());
  const rejected: RowProblem[] = [];
  let rejectedCount = 0;
  let accepted = 0;
  let checked = 0;
  const reject = (problem: RowProblem) => {
    rejectedCount++;
    if (rejected.length < REJECTED_LISTED) rejected.push(problem);
  };
  const startAt = await deps.db.transaction((tx) =>
    insertCampaign(tx, id, target, input, 0, now, 'uploading'),
  );
  const upload = { id, touched: now };
  // ends the feed when the rows are no longer read (a failed batch): the file is closed
  const fed = new AbortController();
  try {
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
      reject({
        row: line,
        code: 'VALIDATION_ERROR',
        message: `line ${line}: ${err.message}`,
        details: [{ path: `line ${line}`, code: 'INVALID_CSV', message: err.message }],
      });
    });
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
    let batch: CheckedRecipient[] = [];
    for await (const { record, info } of parser as AsyncIterable<{
      record: Record<string, string>;
      info: { lines: number };
    }>) {
      const raw = csvRecipient(target, record);
      const r = checkRecipient(
        deps,
        target,
        input.from,
        raw,
        info.lines,
        `line ${info.lines}`,
        input.lang,
      );
      if ('problem' in r) reject(r.problem);
      else {
        checked++;
        batch.push(r.ok);
      }
      if (batch.length >= UPLOAD_ROWS_PER_TRANSACTION) {
        // the file waits meanwhile: the parser is not read
        accepted = await storeUploadBatch(deps, upload, batch, startAt, accepted, signal);
        batch = [];
      }
    }
    await feed;
    // the last batch, and the campaign whole: runnable from this commit
    accepted = await storeUploadBatch(deps, upload, batch, startAt, accepted, signal, 'scheduled');
  } catch (err) {
    // best effort: what is left stays `uploading`, never started, and the sweep deletes it
    await deleteUpload(deps.db, id).catch(() => {});
    throw err;
  } finally {
    fed.abort();
  }
  // a good row not stored had a number listed before it
  return { id, accepted, duplicates: checked - accepted, rejected, rejectedCount };
}

/**
 * One transaction of an upload: `rows` stored, and its campaign's count of recipients and
 * `updated_at` written (its state too, when given) on condition that the campaign is as the
 * upload last left it (src/campaigns/uploads.ts). Answers the recipients stored so far.
 */
async function storeUploadBatch(
  deps: CampaignDeps,
  upload: { id: string; touched: Date },
  rows: readonly CheckedRecipient[],
  startAt: Date,
  before: number,
  signal: AbortSignal | undefined,
  state?: 'scheduled',
): Promise<number> {
  if (signal?.aborted) {
    throw new AppError(
      'UNAVAILABLE',
      'the upload was not stored: its request ended first (the client left, or the server is stopping)',
    );
  }
  const now = deps.clock.now();
  const stored = await deps.db.transaction(async (tx) => {
    const n = before + (await insertRecipients(tx, upload.id, rows, startAt, now));
    const [held] = await tx
      .update(campaigns)
      .set({ recipients: n, updatedAt: now, ...(state && { state }) })
      .where(
        and(
          eq(campaigns.id, upload.id),
          eq(campaigns.state, 'uploading'),
          eq(campaigns.updatedAt, upload.touched),
        ),
      )
      .returning({ id: campaigns.id });
    // taken by the stale-upload sweep (or deleted): this transaction's rows go with it
    if (!held) throw new Error(`campaign ${upload.id} was deleted while it was being stored`);
    return n;
  });
  upload.touched = now;
  return stored;
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
