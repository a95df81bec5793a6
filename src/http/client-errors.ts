/**
 * What Node's HTTP parser refuses before any handler runs (headers over the server's
 * maxHeaderSize, 16 KiB by default; a request line too long for it; bytes that are not
 * HTTP), answered in the one error envelope instead of Node's bare status line: 431
 * HEADERS_TOO_LARGE, 414 URI_TOO_LONG when it is the request line that does not fit, 400
 * otherwise. The connection is closed after the answer, as Node does.
 *
 * @example
 * answerClientErrors(server); // the http.Server that @hono/node-server's serve() returned
 */
import type { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { type ErrorCode, httpStatus } from '../errors.ts';
import { MAX_URL_LENGTH } from './input.ts';

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Content Too Large',
  414: 'URI Too Long',
  431: 'Request Header Fields Too Large',
};

/** The answer to a parser error: the code, and what to say. */
function answerFor(err: NodeJS.ErrnoException & { rawPacket?: Buffer }): {
  code: ErrorCode;
  message: string;
} {
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    // the request line counts against the same limit: name the one that broke it
    const raw = err.rawPacket;
    const lineEnd = raw ? raw.indexOf('\r\n') : -1;
    if (raw && (lineEnd === -1 || lineEnd > MAX_URL_LENGTH)) {
      return {
        code: 'URI_TOO_LONG',
        message: `the request's path and query are longer than ${MAX_URL_LENGTH / 1024} KiB`,
      };
    }
    return { code: 'HEADERS_TOO_LARGE', message: 'the request headers are too large' };
  }
  if (err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') {
    return { code: 'PAYLOAD_TOO_LARGE', message: 'the chunk extensions are too large' };
  }
  return { code: 'VALIDATION_ERROR', message: `the request is not valid HTTP/1.1 (${err.code})` };
}

function response(status: number, body: string): string {
  return [
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

/** `server`: a node:http server (any emitter of 'clientError'). */
export function answerClientErrors(server: EventEmitter): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // as Node's own handler: write only when nothing of a response is on the wire already
    const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      socket.end(response(408, ''));
      return;
    }
    const { code, message } = answerFor(err);
    const body = JSON.stringify({ error: { code, message, details: [] } });
    socket.end(response(httpStatus(code), body));
  });
}
