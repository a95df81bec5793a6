/**
 * docs/errors.md is held to src/errors.ts (issue 22): its table of codes has exactly one row
 * per ERROR_CODES entry, each with httpStatus's status, a meaning and an example; its table
 * of field-level codes names every DETAIL_CODES entry and nothing else.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DETAIL_CODES, ERROR_CODES, httpStatus } from '../../src/errors.ts';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

/** The rows of the table under a `## heading`, as their cells. */
function table(heading: string): string[][] {
  const section = doc.split(/^## /m).find((s) => s.startsWith(`${heading}\n`));
  expect(section, `docs/errors.md has no "## ${heading}" section`).toBeDefined();
  return section!
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .map((l) =>
      l
        .slice(1, -1)
        .split(' | ')
        .map((c) => c.trim()),
    );
}

const codesIn = (cell: string) => [...cell.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1]!);

describe('docs/errors.md', () => {
  it('has one row per error code, with its HTTP status, a meaning and an example', () => {
    const rows = table('Codes');
    const documented = rows.map((r) => codesIn(r[0]!)[0]);
    expect([...documented].sort(), 'codes in the table vs ERROR_CODES').toEqual(
      [...ERROR_CODES].sort(),
    );
    for (const [cell, status, meaning, example] of rows) {
      const code = codesIn(cell!)[0] as (typeof ERROR_CODES)[number];
      expect(Number(status), `status of ${code}`).toBe(httpStatus(code));
      expect(meaning, `meaning of ${code}`).toMatch(/\w{3}/);
      expect(example, `example of ${code}`).toBeTruthy();
    }
  });

  it('names every field-level code, and only those', () => {
    const named = table('Field-level codes').flatMap((r) => codesIn(r[0]!));
    expect(new Set(named).size, 'a code listed twice').toBe(named.length);
    expect([...named].sort()).toEqual([...DETAIL_CODES].sort());
  });

  it('spells every code in UPPER_SNAKE_CASE', () => {
    for (const code of [...ERROR_CODES, ...DETAIL_CODES])
      expect(code).toMatch(/^[A-Z]+(_[A-Z0-9]+)*$/);
  });
});
