/**
 * Zod issues to `ErrorDetail`s.
 *
 * Rules that zod cannot state on its own (a gotoMenu that points nowhere, an action after a
 * hangup) are added as custom issues carrying `params.rule`, a stable upper-case code of
 * DETAIL_CODES that ends up as `ErrorDetail.code`; plain zod issues get theirs, and a sentence
 * for people, in src/zod-issues.ts.
 */
import type { z } from 'zod';
import type { DetailCode } from '../errors.ts';

type Ctx = { addIssue: (issue: z.core.$ZodRawIssue) => void };

/** Adds a custom issue with a stable rule code; `path` is relative to the refined value. */
export function addRule(ctx: Ctx, path: PropertyKey[], rule: DetailCode, message: string): void {
  ctx.addIssue({ code: 'custom', path, message, params: { rule }, input: undefined });
}

// one translation of zod's issues for every part of Switchboard (src/zod-issues.ts)
export { issuesToDetails } from '../zod-issues.ts';
