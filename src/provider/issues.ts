/**
 * Zod issues to `ErrorDetail`s.
 *
 * Rules that zod cannot state on its own (a gotoMenu that points nowhere, an action after a
 * hangup) are added as custom issues carrying `params.rule`, a stable upper-case code that
 * ends up as `ErrorDetail.code`; plain zod issues keep zod's own code (`invalid_type`, ...).
 */
import type { z } from 'zod';
import { type ErrorDetail, formatPath } from '../errors.ts';

type Ctx = { addIssue: (issue: z.core.$ZodRawIssue) => void };

/** Adds a custom issue with a stable rule code; `path` is relative to the refined value. */
export function addRule(ctx: Ctx, path: PropertyKey[], rule: string, message: string): void {
  ctx.addIssue({ code: 'custom', path, message, params: { rule }, input: undefined });
}

/**
 * Flattens zod issues into details whose paths are relative to the parsed value, with one
 * detail per unknown key so that each names its own field.
 *
 * @example
 * issuesToDetails(Message.safeParse(x).error!.issues) // [{ path: 'to', code: 'INVALID_RECIPIENT', ... }]
 */
export function issuesToDetails(
  issues: ReadonlyArray<z.core.$ZodIssue>,
  prefix: PropertyKey[] = [],
): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const issue of issues) {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      // the issue's message lists every key: each detail names its own, or 10 000 unknown
      // keys would make 10 000 copies of a list of 10 000
      const list = issue.keys.join(', ');
      for (const key of issue.keys) {
        out.push({
          path: formatPath([...path, key]),
          code: 'unrecognized_key',
          message:
            issue.keys.length === 1
              ? issue.message
              : issue.message.includes(list)
                ? issue.message.replace(list, () => key)
                : `unknown field: ${key}`,
        });
      }
      continue;
    }
    if (
      issue.code === 'invalid_union' &&
      issue.errors.length > 0 &&
      'discriminator' in issue === false
    ) {
      // A union's branches each failed; report the branch that got furthest, not a vague "invalid input".
      const best = bestBranch(issue.errors);
      if (best) {
        out.push(...issuesToDetails(best, path));
        continue;
      }
    }
    const rule =
      issue.code === 'custom' ? (issue.params as { rule?: unknown } | undefined)?.rule : undefined;
    out.push({
      path: formatPath(path),
      code: typeof rule === 'string' ? rule : issue.code,
      message: issue.message,
    });
  }
  return out;
}

function bestBranch(
  branches: ReadonlyArray<ReadonlyArray<z.core.$ZodIssue>>,
): ReadonlyArray<z.core.$ZodIssue> | undefined {
  let best: ReadonlyArray<z.core.$ZodIssue> | undefined;
  let bestDepth = -1;
  for (const branch of branches) {
    const depth = Math.max(...branch.map((i) => i.path.length));
    if (depth > bestDepth) {
      best = branch;
      bestDepth = depth;
    }
  }
  return best;
}
