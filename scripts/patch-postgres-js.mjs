/**
 * Two fixes to postgres.js 3.4.9, applied to its ESM, CommonJS and Workers copies by
 * `npm install` / `npm ci` (package.json `postinstall`). Idempotent; a postgres.js whose code
 * differs (another version) is left alone with a note.
 *
 * 1. connection.js, a crash (upstream issues porsager/postgres#1066, #1154, #1208; unreleased
 *    fixes #1168, #1209): when a connection closes while a transaction runs (Postgres
 *    restarted, failed over, or a backend killed), postgres.js's own automatic ROLLBACK is
 *    queued on the closed connection, its deferred write runs on a null socket, and the
 *    TypeError thrown from setImmediate kills the whole process. The same close also leaves the
 *    write timer set, so the reconnected connection never sends anything again. Fixed: a write
 *    after the close settles the waiting queries with CONNECTION_CLOSED instead of throwing; a
 *    close forgets the pending bytes, the write timer and the failed query, so the next socket
 *    starts clean. test/faults/postgres-restart.test.ts shows the crash without it.
 *
 * 2. index.js and connection.js, a pool that never heals (upstream #1199, #1195): a
 *    connection that closes while reserved (`sql.reserve()`, which every delivery batch uses:
 *    src/db/client.ts `pipelinedTransaction`) is moved to the closed ones by the pool, but
 *    `release()` then moved it back among the open ones, where every query the pool gave it
 *    failed or never settled until the process restarted; what the reservation had queued
 *    behind a statement being described was never sent nor failed; and a `reserve()` waiting
 *    for a connection when one closed was taken out of the queue and dropped, so it never
 *    settled. Fixed: each reservation knows it lost its connection when the pool cleared
 *    `reserved` (onclose does), so its queries fail with CONNECTION_CLOSED, its queue is failed
 *    at the close, and its `release()` leaves the connection to the pool, which connects it
 *    again when a query needs it; a connection whose socket failed takes no more queries
 *    before its close is handled; a waiting `reserve()` stays queued until a connection is
 *    ready for it, and settles once. test/faults/pool-release.test.ts fails in four ways
 *    without it.
 *
 * 3. query.js, a cancel nobody can wait for: `query.cancel()` starts the cancel request and
 *    returns null, dropping the promise that settles once Postgres has taken the request (its
 *    connection closed); a failure of it was an unhandled rejection. Fixed: `cancel()` returns
 *    that promise. pipelinedTransaction (src/db/client.ts) waits for it before the connection
 *    can serve anyone else, so a late cancel cannot stop the next user's statement.
 *    test/faults/ingest-batch.test.ts ("a batch waiting past its deadline") needs it.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MARK = '(switchboard: closed-socket fix)';
const POOL_MARK = '(switchboard: released-dead-connection fix)';
const CANCEL_MARK = '(switchboard: cancel-promise fix)';

const connectionEdits = [
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

const poolEdits = [
  {
    find: `      : await new Promise((resolve, reject) => {
        const query = { reserve: resolve, reject }
        queries.push(query)`,
    replace: `      : await new Promise((resolve, reject) => {
        // ${POOL_MARK} settled once, and then out of the queue: a connection offered after
        // that goes back to the pool
        let settled = false
        const query = {
          reserve: c => settled ? onopen(c) : (settled = true, queries.remove(query), resolve(c)),
          reject: e => settled || (settled = true, queries.remove(query), reject(e))
        }
        queries.push(query)`,
  },
  {
    find: `    options.onclose && options.onclose(c.id)
    queries.length && connect(c, queries.shift())
  }`,
    replace: `    options.onclose && options.onclose(c.id)
    if (queries.length) {
      // a reservation stays queued (the connection drops one it connects for), and the
      // connection is handed to it once ready, as for reserve()'s own connect
      const next = queries.shift()
      next.reserve && queries.push(next)
      connect(c, next)
    }
  }`,
  },
  {
    find: `    move(c, reserved)
    c.reserved = () => queue.length
      ? c.execute(queue.shift())
      : move(c, reserved)
    c.reserved.release = true

    const sql = Sql(handler)
    sql.release = () => {
      c.reserved = null
      onopen(c)
    }

    return sql

    function handler(q) {
      c.queue === full`,
    replace: `    move(c, reserved)
    // ${POOL_MARK} this reservation's own mark: the pool's onclose clears it
    const mine = c.reserved = () => queue.length
      ? c.execute(queue.shift())
      : move(c, reserved)
    c.reserved.release = true
    c.onclose = e => {
      while (queue.length)
        queue.shift().reject(e)
    }

    const sql = Sql(handler)
    sql.release = () => {
      // closed while reserved: the pool has it (closed, or connected again for someone else)
      if (c.reserved !== mine)
        return
      c.reserved = c.onclose = null
      // failed, its close not yet handled: that close moves it to the closed ones
      c.broken() || onopen(c)
    }

    return sql

    function handler(q) {
      if (c.reserved !== mine)
        return q.reject(Errors.connection('CONNECTION_CLOSED', options))
      c.queue === full`,
  },
];

// the connection's half of fix 2: a socket that failed (destroyed, its 'close' still to come
// on the next turn of the event loop) takes no more queries, which its close would otherwise
// drop unsettled (closed() after an error settles only what was there at the error), and says
// so to the pool, which then does not take it back from a reservation before that close
const poolConnectionEdits = [
  {
    find: `  function execute(q) {
    if (terminated)
      return queryError(q, Errors.connection('CONNECTION_DESTROYED', options))
`,
    replace: `  function execute(q) {
    if (terminated)
      return queryError(q, Errors.connection('CONNECTION_DESTROYED', options))

    // ${POOL_MARK} failed, its close not yet handled
    if (broken())
      return queryError(q, Errors.connection('CONNECTION_CLOSED', options))
`,
  },
  {
    find: `    terminate,
    execute,
    cancel,
    end,
    count: 0,
    id
  }
`,
    replace: `    terminate,
    execute,
    cancel,
    end,
    broken,
    count: 0,
    id
  }

  function broken() {
    return socket !== null && socket.destroyed === true
  }
`,
  },
];

const cancelEdits = [
  {
    find: '  cancel() {\n    return this.canceller && (this.canceller(this), this.canceller = null)\n  }',
    replace: `  cancel() {
    // ${CANCEL_MARK} the promise settled once the request was delivered, not dropped
    const canceller = this.canceller
    this.canceller = null
    return canceller ? canceller(this) : null
  }`,
  },
];

// each fix whole or not at all, per copy: half of fix 2 would call what the other half adds
const fixes = [
  { mark: MARK, edits: { 'connection.js': connectionEdits } },
  { mark: POOL_MARK, edits: { 'connection.js': poolConnectionEdits, 'index.js': poolEdits } },
  { mark: CANCEL_MARK, edits: { 'query.js': cancelEdits } },
];
for (const copy of ['src', 'cjs/src', 'cf/src']) {
  for (const { mark, edits } of fixes) {
    const files = Object.entries(edits).map(([name, list]) => {
      const path = join(root, 'node_modules/postgres', copy, name);
      return { name, list, path, text: existsSync(path) ? readFileSync(path, 'utf8') : undefined };
    });
    if (files.some((f) => f.text === undefined)) continue;
    if (files.every((f) => f.text.includes(mark))) continue;
    const unknown = files.filter(
      (f) => f.text.includes(mark) || !f.list.every((e) => f.text.includes(e.find)),
    );
    if (unknown.length > 0) {
      const names = unknown.map((f) => `${copy}/${f.name}`).join(', ');
      console.warn(`patch-postgres-js: ${names} is not the code this fix knows; left as it is`);
      continue;
    }
    for (const f of files) {
      writeFileSync(
        f.path,
        f.list.reduce((t, e) => t.replace(e.find, e.replace), f.text),
      );
    }
  }
}
