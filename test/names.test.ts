/**
 * One name, one thing: no exported name is declared in two modules under src/. A zod schema
 * and its inferred type of the same name in one module are one thing, and re-exports
 * (`export { x } from './y.ts'`) declare nothing, so neither counts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { expect, test } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');

/**
 * Names deliberately declared in more than one module, each with the modules and the reason.
 * Empty: give one of the things another name rather than adding an entry here.
 */
const ALLOWED: Readonly<Record<string, { modules: readonly string[]; why: string }>> = {};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

const isExported = (node: ts.Node): boolean =>
  ts.canHaveModifiers(node) &&
  (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword) &&
  !(ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.DefaultKeyword);

function bindingNames(name: ts.BindingName): string[] {
  if (ts.isIdentifier(name)) return [name.text];
  return name.elements.flatMap((e) => (ts.isOmittedExpression(e) ? [] : bindingNames(e.name)));
}

/** The names a module declares and exports itself (not those it re-exports from elsewhere). */
function exportedDeclarations(file: string, text = readFileSync(file, 'utf8')): Set<string> {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest);
  const names = new Set<string>();
  const imported = new Set<string>();
  for (const statement of source.statements) {
    const clause = ts.isImportDeclaration(statement) ? statement.importClause : undefined;
    if (clause?.name) imported.add(clause.name.text);
    const bindings = clause?.namedBindings;
    if (bindings && ts.isNamespaceImport(bindings)) imported.add(bindings.name.text);
    if (bindings && ts.isNamedImports(bindings)) {
      for (const element of bindings.elements) imported.add(element.name.text);
    }
  }
  for (const statement of source.statements) {
    if (ts.isVariableStatement(statement) && isExported(statement)) {
      for (const d of statement.declarationList.declarations) {
        for (const name of bindingNames(d.name)) names.add(name);
      }
    } else if (
      (ts.isInterfaceDeclaration(statement) ||
        ts.isTypeAliasDeclaration(statement) ||
        ts.isClassDeclaration(statement) ||
        ts.isFunctionDeclaration(statement) ||
        ts.isEnumDeclaration(statement) ||
        ts.isModuleDeclaration(statement)) &&
      isExported(statement) &&
      statement.name !== undefined &&
      ts.isIdentifier(statement.name)
    ) {
      names.add(statement.name.text);
    } else if (
      ts.isExportDeclaration(statement) &&
      statement.moduleSpecifier === undefined &&
      statement.exportClause !== undefined &&
      ts.isNamedExports(statement.exportClause)
    ) {
      // `export { local as Name }` declares Name here unless `local` was imported (a re-export)
      for (const element of statement.exportClause.elements) {
        const local = (element.propertyName ?? element.name).text;
        if (!imported.has(local)) names.add(element.name.text);
      }
    }
  }
  return names;
}

test('no exported name is declared in two modules under src/', () => {
  const modulesByName = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const module = relative(ROOT, file).split('\\').join('/');
    for (const name of exportedDeclarations(file)) {
      modulesByName.set(name, [...(modulesByName.get(name) ?? []), module]);
    }
  }
  const duplicates = [...modulesByName]
    .filter(([name, modules]) => {
      if (modules.length < 2) return false;
      const allowed = ALLOWED[name];
      return !(allowed && [...modules].sort().join() === [...allowed.modules].sort().join());
    })
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, modules]) => `${name}: ${modules.join(', ')}`);
  expect(
    duplicates,
    `exported names declared in more than one module (rename one, or import it from the other):\n  ${duplicates.join('\n  ')}\n`,
  ).toEqual([]);
});

test('the scan sees declarations of every kind, and not re-exports', () => {
  const sample = [
    "import { a, b as c } from './x.ts';",
    "import * as ns from './y.ts';",
    'const local = 1;',
    'export { a, c as d, ns, local as Own };',
    "export { e } from './z.ts';",
    'export const K = 1, { L, M: [N] } = obj;',
    'export interface I {}',
    'export type T = string;',
    'export function f() {}',
    'export class C {}',
    'export enum E { A }',
    'export default function g() {}',
  ].join('\n');
  expect([...exportedDeclarations('sample.ts', sample)].sort()).toEqual(
    ['C', 'E', 'I', 'K', 'L', 'N', 'Own', 'T', 'f'].sort(),
  );
  // guards the scan itself: a scan that found nothing would pass the test above
  const all = sourceFiles(SRC).flatMap((f) => [...exportedDeclarations(f)]);
  for (const name of ['Clock', 'MessageStatus', 'RateLimit', 'createRateLimiter', 'AppError']) {
    expect(all).toContain(name);
  }
  expect(all.filter((n) => n === 'MessageStatus')).toHaveLength(1);
  expect(exportedDeclarations(join(SRC, 'provider', 'index.ts')).size).toBe(0);
});
