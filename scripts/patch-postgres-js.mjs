/**
 * Fixes a crash of postgres.js 3.4.9 (upstream issues porsager/postgres#1066, #1154, #1208;
 * unreleased fixes #1168, #1209): when a connection closes while a transaction runs (Postgres
 * restarted, failed over, or a backend killed), postgres.js's own automatic ROLLBACK is queued
 * on the closed connection, its deferred write runs on a null socket, and the TypeError thrown
 * from setImmediate kills the whole process. The same close also leaves the write timer set,
 * so the reconnected connection never sends anything again.
 *
 * The fix, applied to the ESM, CommonJS and Workers copies: a write after the close settles
 * the waiting queries with CONNECTION_CLOSED instead of throwing; a close forgets the pending
 * bytes, the write timer and the failed query, so the next socket starts clean.
 * test/faults/postgres-restart.test.ts shows the crash without it.
 *
 * Idempotent; a postgres.js whose code differs (another version) is left alone with a note.
 * Run by `npm install` / `npm ci` (package.json `postinstall`).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MARK = '(switchboard: closed-socket fix)';

const edits = [
  {
    find: '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)',
    replace: `  function nextWrite(fn) {
    if (!socket) {
      // ${MARK} closed meanwhile: drop the bytes, settle what waited on them
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }
    const x = socket.write(chunk, fn)`,
  },
  {
    find: '    clearImmediate(nextWriteTimer)\n    if (socket) {',
    replace:
      '    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    if (socket) {',
  },
  {
    find: "    incomings = null\n    clearImmediate(nextWriteTimer)\n    socket.removeListener('data', data)",
    replace:
      "    incomings = null\n    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    socket.removeListener('data', data)",
  },
  {
    find: "    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))\n",
    replace:
      "    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))\n    query = results = errorResponse = null\n    result = new Result()\n",
  },
];

for (const file of ['src/connection.js', 'cjs/src/connection.js', 'cf/src/connection.js']) {
  const path = join(root, 'node_modules/postgres', file);
  if (!existsSync(path)) continue;
  const text = readFileSync(path, 'utf8');
  if (text.includes(MARK)) continue;
  if (!edits.every((e) => text.includes(e.find))) {
    console.warn(`patch-postgres-js: ${file} is not the code this fix knows; left as it is`);
    continue;
  }
  writeFileSync(
    path,
    edits.reduce((t, e) => t.replace(e.find, e.replace), text),
  );
}
