/**
 * pino, configured once. Secrets never reach a log line: the redact list removes the
 * usual places they travel in (auth headers, tokens, passwords, message texts).
 */
import { pino } from 'pino';

export type Logger = pino.Logger;

const REDACT = [
  'req.headers.authorization',
  'req.headers["x-authorization-key"]',
  'req.headers["x-callback-token"]',
  'req.headers.cookie',
  '*.password',
  '*.token',
  '*.apiKey',
  '*.text',
];

/** Creates the process logger (JSON lines on stdout). */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    { level, redact: { paths: REDACT, censor: '[redacted]' }, base: { service: 'switchboard' } },
    destination,
  );
}
