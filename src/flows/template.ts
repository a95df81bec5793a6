/**
 * `{{param}}` templates: the only substitution the flow language has. No expressions, no
 * escapes, no filters: a template names a param and is replaced by its value, so the static
 * checks can list every name a flow uses.
 *
 * @example
 * renderTemplate('Thanks {{name}}', { name: 'Ann' }) // 'Thanks Ann'
 */

const TEMPLATE = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** A `{{` that does not open a well-formed template, with its offset; null when all are fine. */
export function malformedTemplate(text: string): string | null {
  let at = text.indexOf('{{');
  while (at !== -1) {
    const re = new RegExp(TEMPLATE.source, 'y');
    re.lastIndex = at;
    const m = re.exec(text);
    if (!m) return text.slice(at, at + 24);
    at = text.indexOf('{{', at + m[0].length);
  }
  return null;
}

/** Param names used by the templates in one string. */
export function templateNames(text: string): string[] {
  return [...text.matchAll(TEMPLATE)].map((m) => m[1]!);
}

/**
 * Every string inside a JSON-like value, with its path, so checks can point at each one.
 *
 * @example
 * [...walkStrings({ a: ['x'] }, ['send'])] // [{ path: ['send', 'a', 0], text: 'x' }]
 */
export function* walkStrings(
  value: unknown,
  path: Array<string | number> = [],
): Generator<{ path: Array<string | number>; text: string }> {
  if (typeof value === 'string') yield { path, text: value };
  else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) yield* walkStrings(value[i], [...path, i]);
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) yield* walkStrings(v, [...path, k]);
  }
}

/** Replaces each `{{name}}` with `vars[name]`; a missing (optional) param renders empty. */
export function renderTemplate(text: string, vars: Readonly<Record<string, unknown>>): string {
  if (!text.includes('{{')) return text;
  return text.replace(TEMPLATE, (_, name: string) => {
    const v = vars[name];
    return v === undefined || v === null ? '' : String(v);
  });
}

/** `renderTemplate` over every string of a JSON-like value; keys are left alone. */
export function renderDeep<T>(value: T, vars: Readonly<Record<string, unknown>>): T {
  if (typeof value === 'string') return renderTemplate(value, vars) as T;
  if (Array.isArray(value)) return value.map((v) => renderDeep(v, vars)) as T;
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = renderDeep(v, vars);
    return out as T;
  }
  return value;
}
