/**
 * Accepting a campaign: the flow and each recipient checked (the number, the language, the
 * vars against the flow's params), a bad row reported by its row and field while the good
 * ones go, a number listed twice kept once, and everything stored in one transaction. Nothing
 * is prepared per call here: a recipient costs a row, and its call is built when the
 * scheduler releases it (src/campaigns/scheduler.ts).
 */

import type { FlowRegistry } from '../calls/registry.ts';
import { startableFlow } from '../calls/start-prepare.ts';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/client.ts';
import { campaignRecipients, campaigns } from '../db/schema/index.ts';
import { AppError, type ErrorDetail } from '../errors.ts';
import { type CompiledFlow, validateVars } from '../flows/index.ts';
import { uuidv7 } from '../ids.ts';
import { isE164 } from '../provider/message.ts';
import { issuesToDetails } from '../zod-issues.ts';
import { startingPace } from './scheduler.ts';
import {
  CampaignRecipientInput,
  type CreateCampaignRequest,
  NO_RETRY,
  type RetryPolicy,
} from './schemas.ts';
import type { CallingWindow } from './windows.ts';

export interface CampaignDeps {
  db: Db;
  clock: Clock;
  flows: FlowRegistry;
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
 * One recipient checked against the flow; `where` names the row in messages (`recipients[3]`
 * or `line 4`).
 */
export function checkRecipient(
  compiled: CompiledFlow,
  raw: unknown,
  row: number,
  where: string,
  defaultLang: string | undefined,
): { ok: CheckedRecipient } | { problem: RowProblem } {
  const problem = (code: string, details: ErrorDetail[]): { problem: RowProblem } => ({
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
  const flow = await startableFlow(deps, input.flow, 'flow');
  const compiled = flow.compiled;
  if (input.lang !== undefined && !compiled.languages.includes(input.lang)) {
    throw new AppError(
      'INVALID_LANGUAGE',
      `flow "${compiled.id}" has no language "${input.lang}"`,
      [
        {
          path: 'lang',
          code: 'UNKNOWN_LANGUAGE',
          message: `must be one of ${compiled.languages.join(', ')}`,
        },
      ],
    );
  }
  const rejected: RowProblem[] = [];
  const rows: CheckedRecipient[] = [];
  const seen = new Set<string>();
  let duplicates = 0;
  input.recipients.forEach((raw, i) => {
    const r = checkRecipient(compiled, raw, i, `recipients[${i}]`, input.lang);
    if ('problem' in r) rejected.push(r.problem);
    else if (seen.has(r.ok.phone)) duplicates++;
    else {
      seen.add(r.ok.phone);
      rows.push(r.ok);
    }
  });
  const now = deps.clock.now();
  const id = uuidv7(now.getTime());
  const startAt = input.startAt ? new Date(input.startAt) : now;
  await deps.db.transaction(async (tx) => {
    await tx.insert(campaigns).values({
      id,
      name: input.name ?? null,
      flowId: compiled.id,
      from: input.from,
      lang: input.lang ?? null,
      state: 'scheduled',
      startAt,
      perMinute: input.perMinute ?? 60,
      maxConcurrent: input.maxConcurrent ?? null,
      window: (input.window ?? null) satisfies CallingWindow | null,
      retry: (input.retry ?? NO_RETRY) satisfies RetryPolicy,
      pacedAt: startingPace(startAt, input.perMinute ?? 60),
      recipients: rows.length,
      createdAt: now,
      updatedAt: now,
    });
    for (let i = 0; i < rows.length; i += 1000) {
      await tx.insert(campaignRecipients).values(
        rows.slice(i, i + 1000).map((r) => ({
          campaignId: id,
          line: r.line,
          phone: r.phone,
          vars: r.vars,
          lang: r.lang,
          state: 'pending',
          nextAt: startAt,
          updatedAt: now,
        })),
      );
    }
  });
  return { id, accepted: rows.length, duplicates, rejected };
}
