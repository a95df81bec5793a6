/**
 * A call's vars against its flow's params: every required param present, each of its type,
 * nothing undeclared, and phone numbers out in E.164.
 *
 * Types are strict: vars are JSON values and carry their JSON type, so a string param takes
 * a JSON string only (`"name": 5` is refused naming `vars.name`, not stored as "5") and a
 * number param a JSON number. Vars written as text (a command line's `--var k=v`, a CSV
 * cell, a console form) are read first with `readTextVars`, by each param's declared type.
 *
 * @example
 * validateVars(compiled, { name: 'Ann', date: '2025-03-01' })
 * // { ok: true, vars: { name: 'Ann', date: '2025-03-01' } }
 * validateVars(compiled, readTextVars(compiled.params, { count: '3' })) // count: 3
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { DetailCode, ErrorDetail } from '../errors.ts';
import type { CompiledFlow, CompiledParam } from './compile.ts';

export type VarsResult =
  | { ok: true; vars: Record<string, string | number | boolean> }
  | { ok: false; details: ErrorDetail[] };

type Checked = { value: string | number | boolean } | { code: DetailCode; error: string };

const DECIMAL = /^-?\d+(\.\d+)?(e[+-]?\d+)?$/i;

/**
 * Vars given as text, as JSON values: the text of a number, integer or boolean param read
 * as one when it is written as one (`3`, `12.5`, `true`); every other value as it is, for
 * `validateVars` to judge.
 *
 * @example
 * readTextVars({ count: { type: 'integer' } }, { count: '3', name: 'Ann' }) // { count: 3, name: 'Ann' }
 */
export function readTextVars(
  params: Readonly<Record<string, { type: string }>>,
  text: Readonly<Record<string, string>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, raw] of Object.entries(text)) {
    const type = Object.hasOwn(params, name) ? params[name]!.type : undefined;
    const trimmed = raw.trim();
    if ((type === 'number' || type === 'integer') && DECIMAL.test(trimmed))
      out[name] = Number(trimmed);
    else if (type === 'boolean' && (trimmed === 'true' || trimmed === 'false'))
      out[name] = trimmed === 'true';
    else out[name] = raw;
  }
  return out;
}

/** What a JSON value is, for a message: "a number", "true or false", "a list". */
function kindOf(raw: unknown): string {
  if (Array.isArray(raw)) return 'a list';
  if (typeof raw === 'boolean') return 'true or false';
  if (typeof raw === 'object') return 'an object';
  return `a ${typeof raw}`;
}

/** "a string param", "an integer param" */
const aParam = (param: CompiledParam) =>
  `${/^[aeiou]/.test(param.type) ? 'an' : 'a'} ${param.type} param`;

const wrongType = (param: CompiledParam, want: string, raw: unknown): Checked => ({
  code: 'INVALID_TYPE',
  error: `${aParam(param)} takes ${want}, not ${kindOf(raw)}`,
});

function check(param: CompiledParam, raw: unknown): Checked {
  switch (param.type) {
    case 'string':
      return typeof raw === 'string' ? { value: raw } : wrongType(param, 'a string', raw);
    case 'number':
    case 'integer': {
      const want = param.type === 'integer' ? 'an integer' : 'a number';
      if (typeof raw !== 'number') {
        return typeof raw === 'string'
          ? {
              code: 'INVALID_TYPE',
              error: `${aParam(param)} takes ${want} as a JSON number, not a string`,
            }
          : wrongType(param, want, raw);
      }
      if (!Number.isFinite(raw)) return { code: 'INVALID_VALUE', error: `must be ${want}` };
      if (param.type === 'integer' && !Number.isInteger(raw))
        return { code: 'INVALID_VALUE', error: 'must be an integer' };
      return { value: raw };
    }
    case 'boolean':
      if (typeof raw === 'boolean') return { value: raw };
      return typeof raw === 'string'
        ? { code: 'INVALID_TYPE', error: 'a boolean param takes true or false, not a string' }
        : wrongType(param, 'true or false', raw);
    case 'phone': {
      if (typeof raw !== 'string') return wrongType(param, 'a phone number as a string', raw);
      const phone = parsePhoneNumberFromString(raw);
      if (!phone?.isValid())
        return {
          code: 'INVALID_FORMAT',
          error: 'must be a valid phone number in E.164 (+380501234567)',
        };
      return { value: phone.number };
    }
    case 'date': {
      if (typeof raw !== 'string') return wrongType(param, 'a date as a string', raw);
      if (!/^\d{4}-\d{2}-\d{2}$/.test(raw)) {
        return { code: 'INVALID_FORMAT', error: 'must be a date as YYYY-MM-DD' };
      }
      const d = new Date(`${raw}T00:00:00Z`);
      if (Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== raw) {
        return { code: 'INVALID_FORMAT', error: 'must be a real calendar date (YYYY-MM-DD)' };
      }
      return { value: raw };
    }
    case 'url':
      if (typeof raw !== 'string') return wrongType(param, 'a URL as a string', raw);
      if (!/^https?:\/\/\S+$/.test(raw) || !URL.canParse(raw)) {
        return { code: 'INVALID_FORMAT', error: 'must be an absolute http(s) URL' };
      }
      return { value: raw };
  }
}

/**
 * Checks and normalizes vars; defaults fill absent optional params. Detail paths are
 * `vars.<name>`.
 *
 * @example
 * validateVars(compiled, { date: 5 })
 * // { ok: false, details: [{ path: 'vars.name', code: 'REQUIRED', ... }, { path: 'vars.date', code: 'INVALID_TYPE', ... }] }
 */
export function validateVars(compiled: CompiledFlow, vars: unknown): VarsResult {
  if (vars !== undefined && vars !== null && (typeof vars !== 'object' || Array.isArray(vars))) {
    return {
      ok: false,
      details: [{ path: 'vars', code: 'INVALID_TYPE', message: 'vars must be an object' }],
    };
  }
  const given = (vars ?? {}) as Record<string, unknown>;
  const details: ErrorDetail[] = [];
  const out: Record<string, string | number | boolean> = {};
  for (const [name, param] of Object.entries(compiled.params)) {
    const raw = given[name];
    if (raw === undefined || raw === null) {
      if (param.default !== undefined) out[name] = param.default;
      else if (!param.optional) {
        details.push({
          path: `vars.${name}`,
          code: 'REQUIRED',
          message: `required by flow "${compiled.id}" (${param.type})`,
        });
      }
      continue;
    }
    const result = check(param, raw);
    if ('error' in result)
      details.push({ path: `vars.${name}`, code: result.code, message: result.error });
    else out[name] = result.value;
  }
  for (const name of Object.keys(given)) {
    if (!(name in compiled.params)) {
      details.push({
        path: `vars.${name}`,
        code: 'UNKNOWN_PARAM',
        message: `flow "${compiled.id}" has no param "${name}"`,
      });
    }
  }
  return details.length > 0 ? { ok: false, details } : { ok: true, vars: out };
}
