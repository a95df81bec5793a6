/**
 * A test skipped because of the environment says why: every conditional skip in test/
 * (`it.runIf(c)`, `describe.skipIf(c)`, `ctx.skip()` inside a test, ...) names its test with
 * `onlyIf` (test/support/skip.ts), whose name carries the reason where the test is skipped;
 * test/support/skip-reporter.ts prints those names at the end of the run.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { expect, test } from 'vitest';
import { onlyIf } from './support/skip.ts';

const ROOT = join(import.meta.dirname, '..');
const TEST = join(ROOT, 'test');

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

const TEST_FNS = new Set(['it', 'test', 'describe']);
const CONDITIONAL = new Set(['runIf', 'skipIf']);

/** `it.runIf(c)` / `describe.skipIf(c)`: the call that returns the test function. */
function isConditional(node: ts.Node): node is ts.CallExpression {
  return (
    ts.isCallExpression(node) &&
    ts.isPropertyAccessExpression(node.expression) &&
    ts.isIdentifier(node.expression.expression) &&
    TEST_FNS.has(node.expression.expression.text) &&
    CONDITIONAL.has(node.expression.name.text)
  );
}

/** `it(...)`, `test(...)`, `it.runIf(c)(...)`: a call that declares a test or a block. */
function isDeclaration(node: ts.Node): node is ts.CallExpression {
  if (!ts.isCallExpression(node)) return false;
  const callee = node.expression;
  return (ts.isIdentifier(callee) && TEST_FNS.has(callee.text)) || isConditional(callee);
}

/** `x.skip()` with no arguments: a test skipping itself at run time (`ctx.skip()`). */
function isDynamicSkip(node: ts.Node): boolean {
  return (
    ts.isCallExpression(node) &&
    ts.isPropertyAccessExpression(node.expression) &&
    node.expression.name.text === 'skip' &&
    !(ts.isIdentifier(node.expression.expression) && TEST_FNS.has(node.expression.expression.text))
  );
}

/** Whether a declaration's name is built by onlyIf, directly or through a const of the file. */
function namedWithReason(decl: ts.CallExpression, source: ts.SourceFile): boolean {
  const name = decl.arguments[0];
  if (!name) return false;
  const isOnlyIf = (e: ts.Expression) =>
    ts.isCallExpression(e) && ts.isIdentifier(e.expression) && e.expression.text === 'onlyIf';
  if (isOnlyIf(name)) return true;
  if (!ts.isIdentifier(name)) return false;
  let found = false;
  const visit = (n: ts.Node) => {
    if (
      ts.isVariableDeclaration(n) &&
      ts.isIdentifier(n.name) &&
      n.name.text === name.text &&
      n.initializer !== undefined &&
      isOnlyIf(n.initializer)
    ) {
      found = true;
    }
    ts.forEachChild(n, visit);
  };
  visit(source);
  return found;
}

/** Every conditional skip in `file` whose test does not say why, as `file:line`. */
function unexplainedSkips(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const where = (n: ts.Node) =>
    `${relative(ROOT, file)}:${source.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
  const visit = (node: ts.Node, enclosing: ts.CallExpression | undefined) => {
    if (isDeclaration(node) && isConditional(node.expression) && !namedWithReason(node, source)) {
      out.push(where(node));
    }
    if (isDynamicSkip(node) && (!enclosing || !namedWithReason(enclosing, source))) {
      out.push(where(node));
    }
    const next = isDeclaration(node) ? node : enclosing;
    ts.forEachChild(node, (child) => visit(child, next));
  };
  visit(source, undefined);
  return out;
}

test('every test skipped because of the environment says why in its name', () => {
  const files = testFiles(TEST);
  expect(files.length).toBeGreaterThan(10);
  expect(files.flatMap(unexplainedSkips)).toEqual([]);
});

test('a skipped name carries its reason, and a name that runs is left alone', () => {
  expect(onlyIf(false, 'on Postgres', 'TEST_DATABASE_URL is not set')).toBe(
    'on Postgres (skipped: TEST_DATABASE_URL is not set)',
  );
  expect(onlyIf(true, 'on Postgres', 'TEST_DATABASE_URL is not set')).toBe('on Postgres');
});
