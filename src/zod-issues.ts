/**
 * zod's issues in Switchboard's words, the one place they are translated: each kind of issue
 * gets a detail code of DETAIL_CODES (src/errors.ts) and a sentence for people in place of
 * the validator's own wording ("Invalid input: expected string, received number" becomes
 * "must be a string, not a number"). The sentences are zod's global error map, installed when
 * this module loads (src/errors.ts imports it, so before anything parses); a message a schema
 * states itself, or a provider rule's (src/provider/issues.ts `addRule`), still wins.
 * `issuesToDetails` turns a failed parse into envelope details.
 *
 * @example
 * issuesToDetails(z.object({ to: z.string() }).safeParse({ to: 5 }).error!.issues)
 * // [{ path: 'to', code: 'INVALID_TYPE', message: 'must be a string, not a number' }]
 */
import { z } from 'zod';
// a cycle (src/errors.ts imports this module for its error map), harmless: formatPath is
// only called inside functions, never while the modules load
import { type DetailCode, type ErrorDetail, formatPath } from './errors.ts';

/** The sentence of a value that is missing: also how `issuesToDetails` tells it is (REQUIRED). */
export const IS_REQUIRED = 'is required';

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  bigint: 'an integer',
  boolean: 'true or false',
  object: 'an object',
  array: 'a list',
  date: 'a date',
  null: 'null',
  undefined: 'absent',
  nan: 'a number',
};

/** What a JSON value is, in words: "a number", "null", "a list". */
function kindOf(input: unknown): string {
  if (input === null) return 'null';
  if (Array.isArray(input)) return 'a list';
  if (typeof input === 'number') return Number.isFinite(input) ? 'a number' : 'not a number';
  return TYPE_NAMES[typeof input] ?? typeof input;
}

const FORMATS: Record<string, string> = {
  email: 'an email address',
  url: 'an absolute URL',
  uuid: 'a UUID (00000000-0000-4000-8000-000000000000)',
  guid: 'a UUID (00000000-0000-4000-8000-000000000000)',
  datetime: 'a date and time in ISO 8601 with its offset (2025-03-01T09:00:00Z)',
  date: 'a date as YYYY-MM-DD',
  time: 'a time as HH:MM[:SS]',
  duration: 'an ISO 8601 duration (PT30S)',
  e164: 'a phone number in E.164 (+380501234567)',
  ipv4: 'an IPv4 address',
  ipv6: 'an IPv6 address',
  base64: 'base64 text',
  base64url: 'base64url text',
  jwt: 'a JWT',
  emoji: 'an emoji',
};

const UNITS: Record<string, [string, string]> = {
  string: ['character', 'characters'],
  array: ['item', 'items'],
  set: ['item', 'items'],
  map: ['entry', 'entries'],
  file: ['byte', 'bytes'],
};

function plural(n: number | bigint, [one, many]: [string, string]): string {
  return `${n} ${Number(n) === 1 ? one : many}`;
}

/** A literal as a reader sees it: strings quoted, the rest as JSON writes them. */
function literal(v: unknown): string {
  return typeof v === 'bigint' ? String(v) : (JSON.stringify(v) ?? String(v));
}

function sizeSentence(
  issue: { origin: string; exact?: boolean; inclusive?: boolean },
  bound: number | bigint,
  side: 'least' | 'most',
): string {
  const units = UNITS[issue.origin];
  if (units) {
    if (issue.exact) return `must have exactly ${plural(bound, units)}`;
    if (side === 'least' && Number(bound) === 1 && issue.inclusive !== false)
      return 'must not be empty';
    const n =
      issue.inclusive === false
        ? side === 'least'
          ? Number(bound) + 1
          : Number(bound) - 1
        : bound;
    return `must have at ${side} ${plural(n, units)}`;
  }
  if (issue.exact) return `must be exactly ${bound}`;
  if (issue.inclusive === false)
    return `must be ${side === 'least' ? 'more' : 'less'} than ${bound}`;
  return `must be at ${side} ${bound}`;
}

/**
 * The sentence for one raw issue, relative to its field ("must be a string, not a number");
 * zod's global error map, so it runs where the issue is made, with the input at hand.
 */
export function issueSentence(issue: z.core.$ZodRawIssue): string {
  switch (issue.code) {
    case 'invalid_type': {
      if (issue.input === undefined) return IS_REQUIRED;
      const expected = TYPE_NAMES[issue.expected] ?? `of type ${issue.expected}`;
      const got = kindOf(issue.input);
      return got === expected || got === 'not a number'
        ? `must be ${expected}`
        : `must be ${expected}, not ${got}`;
    }
    case 'invalid_value':
      if (issue.input === undefined) return IS_REQUIRED;
      return issue.values.length === 1
        ? `must be ${literal(issue.values[0])}`
        : `must be one of ${issue.values.map(literal).join(', ')}`;
    case 'too_small':
      return sizeSentence(issue, issue.minimum, 'least');
    case 'too_big':
      return sizeSentence(issue, issue.maximum, 'most');
    case 'invalid_format': {
      const f = issue as z.core.$ZodRawIssue<z.core.$ZodIssueInvalidStringFormat>;
      if (f.format === 'starts_with')
        return `must start with "${(f as { prefix?: string }).prefix}"`;
      if (f.format === 'ends_with') return `must end with "${(f as { suffix?: string }).suffix}"`;
      if (f.format === 'includes') return `must contain "${(f as { includes?: string }).includes}"`;
      const known = FORMATS[f.format];
      return known ? `must be ${known}` : 'is not in the form this field takes';
    }
    case 'not_multiple_of':
      return `must be a multiple of ${issue.divisor}`;
    case 'unrecognized_keys':
      return issue.keys.length === 1
        ? `"${issue.keys[0]}" is not a field here`
        : `${issue.keys.map((k) => `"${k}"`).join(', ')} are not fields here`;
    case 'invalid_key':
      return 'has a key that is not allowed here';
    case 'invalid_element':
      return 'holds a value that is not allowed here';
    case 'invalid_union': {
      const options = (issue as { options?: unknown[] }).options;
      if (options && options.length > 0) return `must be one of ${options.map(literal).join(', ')}`;
      if (issue.input === undefined) return IS_REQUIRED;
      return 'fits none of the forms this field takes';
    }
    default:
      return 'is not valid here';
  }
}

z.config({ customError: issueSentence });

/**
 * Whether an issue is about a value that is not there: its input when the parse kept it
 * (`reportInput`), else its sentence (this map's, or a schema's own "... is required").
 */
function missing(issue: z.core.$ZodIssue): boolean {
  if ('input' in issue) return issue.input === undefined;
  return issue.message.endsWith(IS_REQUIRED);
}

/** The detail code of a (finished) issue; a provider rule carries its own (`params.rule`). */
function detailCode(issue: z.core.$ZodIssue): DetailCode {
  switch (issue.code) {
    case 'invalid_type':
    case 'invalid_value':
    case 'invalid_union':
      if (missing(issue)) return 'REQUIRED';
      return issue.code === 'invalid_type' ? 'INVALID_TYPE' : 'INVALID_VALUE';
    case 'too_small':
      return 'TOO_SMALL';
    case 'too_big':
      return 'TOO_BIG';
    case 'invalid_format':
      return 'INVALID_FORMAT';
    case 'not_multiple_of':
      return 'NOT_MULTIPLE_OF';
    case 'unrecognized_keys':
      return 'UNKNOWN_FIELD';
    case 'invalid_key':
      return 'INVALID_KEY';
    case 'invalid_element':
      return 'INVALID_VALUE';
    case 'custom': {
      const rule = (issue.params as { rule?: DetailCode } | undefined)?.rule;
      return rule ?? 'INVALID_VALUE';
    }
  }
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
      // one detail per key, each naming its own (10 000 unknown keys make 10 000 short
      // details, not 10 000 copies of a list of 10 000); a schema's own wording is kept
      const list = issue.keys.join(', ');
      for (const key of issue.keys) {
        out.push({
          path: formatPath([...path, key]),
          code: 'UNKNOWN_FIELD',
          message:
            issue.keys.length === 1
              ? issue.message
              : issue.message.includes(list)
                ? issue.message.replace(list, () => key)
                : `"${key}" is not a field here`,
        });
      }
      continue;
    }
    if (
      issue.code === 'invalid_union' &&
      issue.errors.length > 0 &&
      'discriminator' in issue === false
    ) {
      // a union's branches each failed: report the branch that got furthest, not a vague
      // "fits none of the forms"
      const best = bestBranch(issue.errors);
      if (best) {
        out.push(...issuesToDetails(best, path));
        continue;
      }
    }
    out.push({ path: formatPath(path), code: detailCode(issue), message: issue.message });
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
