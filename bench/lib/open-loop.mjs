/**
 * The open-loop load generator of `npm run bench`, run as a child process of its own
 * (bench/lib/load.ts forks it): request i is due at start + i/rate whatever the answers do,
 * and its latency counts from when it was due, so a server that falls behind shows it (no
 * coordinated omission).
 *
 * It is lean on purpose, because it shares the machine's two cores with what it measures:
 * - the requests arrive already built, as raw HTTP/1.1 bytes, and each is one socket write;
 * - answers are read off keep-alive sockets by a small HTTP/1.1 response reader
 *   (Content-Length and chunked bodies), not by node:http, whose request and response
 *   objects cost several times the CPU of the bare endpoint it was measuring;
 * - its own heap stays small (no database client, no results of earlier parts), so its
 *   garbage collections are short and rare.
 *
 * Protocol (fork with serialization 'advanced'): the parent sends one `run` message, the
 * child answers with one `done` message and exits.
 *   run:  { host, port, rate, connections, timeoutMs, requests: Buffer, offsets: Uint32Array }
 *         (request i is requests[offsets[i] .. offsets[i + 1]])
 *   done: { latencies: Float64Array (ms; NaN for a request that got no answer),
 *           statuses: Uint16Array (0: no answer), errors, seconds, cpuSeconds (its own),
 *           startMonotonicMs (when request 0 was due, on CLOCK_MONOTONIC) }
 */
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';

const CRLF2 = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');

/**
 * Reads HTTP/1.1 responses off one connection's bytes, in order. `push` takes a chunk and
 * calls `onResponse(status, close)` for each whole response in it.
 */
export function responseReader(onResponse) {
  let buf = Buffer.alloc(0);
  // the response being read: after its head, what its body still needs
  let status = 0;
  let close = false;
  let remaining = -1; // bytes of a Content-Length body still to come
  let chunked = false;
  let inHead = true;

  const head = () => {
    const end = buf.indexOf(CRLF2);
    if (end < 0) return false;
    const text = buf.toString('latin1', 0, end);
    buf = buf.subarray(end + 4);
    status = Number(text.slice(9, 12));
    const lower = text.toLowerCase();
    const length = /\r\ncontent-length:\s*(\d+)/.exec(lower);
    chunked = /\r\ntransfer-encoding:[^\r]*chunked/.test(lower);
    close = /\r\nconnection:\s*close/.test(lower);
    remaining = chunked ? -1 : length ? Number(length[1]) : 0;
    inHead = false;
    return true;
  };
  // a chunked body: sizes in hex, each chunk followed by CRLF, a zero chunk and CRLF ending it
  const chunks = () => {
    for (;;) {
      const eol = buf.indexOf(CRLF);
      if (eol < 0) return false;
      const size = Number.parseInt(buf.toString('latin1', 0, eol), 16);
      if (size === 0) {
        // no trailers are sent to us: the last chunk's line and the empty line after it
        if (buf.length < eol + 4) return false;
        buf = buf.subarray(eol + 4);
        return true;
      }
      if (buf.length < eol + 2 + size + 2) return false;
      buf = buf.subarray(eol + 2 + size + 2);
    }
  };

  return {
    push(chunk) {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        if (inHead && !head()) return;
        if (chunked) {
          if (!chunks()) return;
        } else {
          if (buf.length < remaining) return;
          buf = buf.subarray(remaining);
        }
        inHead = true;
        onResponse(status, close);
      }
    },
  };
}

/** Runs one open-loop load; resolves with the `done` message's fields. */
export function runOpenLoop({ host, port, rate, connections, timeoutMs, requests, offsets }) {
  const total = offsets.length - 1;
  const interval = 1000 / rate;
  const latencies = new Float64Array(total).fill(Number.NaN);
  const statuses = new Uint16Array(total);
  let errors = 0;
  let settled = 0;
  let sent = 0;
  let open = 0;
  const idle = [];
  const waiting = []; // due requests with no free connection
  const start = performance.now() + 20;
  let lastAnswer = start;

  return new Promise((resolve) => {
    const settle = () => {
      if (++settled < total) return;
      for (const s of idle) s.destroy();
      // when the first request was due, on the clock of --trace-gc and perf (CLOCK_MONOTONIC)
      const startMonotonicMs =
        Number(process.hrtime.bigint() / 1000n) / 1000 - (performance.now() - start);
      resolve({
        latencies,
        statuses,
        errors,
        seconds: (lastAnswer - start) / 1000,
        startMonotonicMs,
      });
    };
    const fail = () => {
      errors++;
      settle();
    };

    const newConnection = () => {
      open++;
      const socket = connect({ host, port, noDelay: true });
      const inFlight = []; // request indexes, in the order they were written
      let closed = false;
      let timer;
      const arm = () => {
        clearTimeout(timer);
        if (inFlight.length > 0) timer = setTimeout(() => socket.destroy(), timeoutMs);
      };
      const reader = responseReader((status, close) => {
        const i = inFlight.shift();
        if (i === undefined) return;
        lastAnswer = performance.now();
        latencies[i] = lastAnswer - (start + i * interval);
        statuses[i] = status;
        settle();
        arm();
        if (close) socket.end();
        else if (inFlight.length === 0) release(conn);
      });
      socket.on('data', (chunk) => reader.push(chunk));
      socket.on('error', () => {});
      socket.on('close', () => {
        closed = true;
        clearTimeout(timer);
        open--;
        const at = idle.indexOf(conn);
        if (at >= 0) idle.splice(at, 1);
        // what was written and not answered is lost: an error each, never sent again
        for (let n = inFlight.splice(0).length; n > 0; n--) fail();
        // others may wait for a connection this one no longer takes
        if (waiting.length > 0 && open < connections) send(newConnection(), waiting.shift());
      });
      const conn = {
        write(i) {
          inFlight.push(i);
          arm();
          socket.write(requests.subarray(offsets[i], offsets[i + 1]));
        },
        get closed() {
          return closed;
        },
        destroy() {
          socket.destroy();
        },
      };
      return conn;
    };
    const send = (conn, i) => conn.write(i);
    const release = (conn) => {
      const next = waiting.shift();
      if (next !== undefined) send(conn, next);
      else idle.push(conn);
    };
    const dispatch = (i) => {
      let conn = idle.pop();
      while (conn?.closed) conn = idle.pop();
      if (conn) return send(conn, i);
      if (open < connections) return send(newConnection(), i);
      waiting.push(i);
    };
    const tick = () => {
      const now = performance.now();
      while (sent < total && start + sent * interval <= now) dispatch(sent++);
      if (sent < total) setTimeout(tick, Math.max(0, start + sent * interval - performance.now()));
    };
    setTimeout(tick, Math.max(0, start - performance.now()));
  });
}

// run as a child of bench/lib/load.ts (not when imported, as by its test)
if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  process.once('message', async (msg) => {
    const result = await runOpenLoop(msg);
    const cpu = process.cpuUsage();
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    process.send({ type: 'done', ...result, cpuSeconds }, () => process.exit(0));
  });
}
