/**
 * A call's vars against its flow's params: every required param present, each of its type,
 * nothing undeclared. Strings are accepted for numbers and booleans (vars also come from the
 * command line and CSV files), and phone numbers come out in E.164.
 *
 * @example
 * validateVars(compiled, { name: 'Ann', date: '2025-03-01' })
 * // { ok: true, vars: { name: 'Ann', date: '2025-03-01' } }
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { ErrorDetail } from '../errors.ts';
import type { CompiledFlow, CompiledParam } from './compile.ts';

export type VarsResult =
  | { ok: true; vars: Record<string, string | number | boolean> }
  | { ok: false; details: ErrorDetail[] };

type Coerced = { value: string | number | boolean } | { error: string };

function coerce(param: CompiledParam, raw: unknown): Coerced {
  switch (param.type) {
    case 'string':
      if (typeof raw === 'string') return { value: raw };
      if (typeof raw === 'number' || typeof raw === 'boolean') return { value: String(raw) };
      return { error: 'must be a string' };
    case 'number':
    case 'integer': {
      const n =
        typeof raw === 'number'
          ? raw
          : typeof raw === 'string' && raw.trim() !== ''
            ? Number(raw)
            : Number.NaN;
      if (!Number.isFinite(n))
        return { error: `must be ${param.type === 'integer' ? 'an integer' : 'a number'}` };
      if (param.type === 'integer' && !Number.isInteger(n)) return { error: 'must be an integer' };
      return { value: n };
    }
    case 'boolean':
      if (typeof raw === 'boolean') return { value: raw };
      if (raw === 'true' || raw === 'false') return { value: raw === 'true' };
      return { error: 'must be true or false' };
    case 'phone': {
      if (typeof raw !== 'string')
        return { error: 'must be a phone number in E.164 (+380501234567)' };
      const phone = parsePhoneNumberFromString(raw);
      if (!phone?.isValid())
        return { error: 'must be a valid phone number in E.164 (+380501234567)' };
      return { value: phone.number };
    }
    case 'date': {
      if (typeof raw !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(raw)) {
        return { error: 'must be a date as YYYY-MM-DD' };
      }
      const d = new Date(`${raw}T00:00:00Z`);
      if (Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== raw) {
        return { error: 'must be a real calendar date (YYYY-MM-DD)' };
      }
      return { value: raw };
    }
    case 'url':
      if (typeof raw !== 'string' || !/^https?:\/\/\S+$/.test(raw) || !URL.canParse(raw)) {
        return { error: 'must be an absolute http(s) URL' };
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
 * // { ok: false, details: [{ path: 'vars.name', code: 'required', ... }, { path: 'vars.date', code: 'invalid_type', ... }] }
 */
export function validateVars(compiled: CompiledFlow, vars: unknown): VarsResult {
  if (vars !== undefined && vars !== null && (typeof vars !== 'object' || Array.isArray(vars))) {
    return {
      ok: false,
      details: [{ path: 'vars', code: 'invalid_type', message: 'vars must be an object' }],
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
          code: 'required',
          message: `required by flow "${compiled.id}" (${param.type})`,
        });
      }
      continue;
    }
    const result = coerce(param, raw);
    if ('error' in result)
      details.push({ path: `vars.${name}`, code: 'invalid_type', message: result.error });
    else out[name] = result.value;
  }
  for (const name of Object.keys(given)) {
    if (!(name in compiled.params)) {
      details.push({
        path: `vars.${name}`,
        code: 'unknown_param',
        message: `flow "${compiled.id}" has no param "${name}"`,
      });
    }
  }
  return details.length > 0 ? { ok: false, details } : { ok: true, vars: out };
}
