/**
 * pino, configured once, so that no call site has to remember what may not be logged. Every
 * line is scrubbed just before it is written:
 * - secrets (tokens, passwords, keys, authorization headers, cookies) and content (message
 *   texts, raw callback bodies, payloads, menus, call vars) are replaced by `[redacted]`
 *   under their key, at any depth, in log objects, child bindings and errors;
 * - phone numbers are masked to their last four digits (`+********4567`) unless `logPii`:
 *   E.164 numbers anywhere in the line (messages, paths, error texts, also `%2B`-encoded),
 *   and bare digit strings under phone-like keys (`to`, `from`, `phone`, ...);
 * - bearer tokens, `token=`-like query parameters and the values of a failed database query
 *   inside strings are cut out.
 *
 * The lines are JSON, one per line; on a terminal (LOG_FORMAT=auto, the default, or
 * LOG_FORMAT=pretty) the scrubbed JSON line is turned into a readable one by pino-pretty, in
 * this thread (no transport worker), so the scrubbing above holds in both formats.
 *
 * @example
 * const logger = createLogger({ level: config.logLevel, logPii: config.logPii });
 * logger.info({ to: '+380501234567', text: 'Hi' }, 'sent'); // {"to":"+********4567","text":"[redacted]",...}
 */

import { createRequire } from 'node:module';
import { pino } from 'pino';

// pino-pretty is loaded only when lines are made readable: a server logging JSON (every
// deployment) does not carry it
const require = createRequire(import.meta.url);
const loadPretty = (): typeof import('pino-pretty') => require('pino-pretty');

export type Logger = pino.Logger;

export interface LoggerOptions {
  level: string;
  /** keep phone numbers whole (LOG_PII=true); secrets and texts are removed regardless */
  logPii?: boolean;
  /** LOG_FORMAT; here `json` unless given. `auto` is `pretty` when stdout is a terminal */
  format?: 'auto' | 'json' | 'pretty';
}

/** What a secret or a content field is replaced by, in logs and in listings that show headers. */
export const REDACTED = '[redacted]';

// secrets, by the end of their key: apiToken, callbackToken, x-callback-token, webhookSecret, ...
const SECRET_KEY = /(token|secret|password|passwd|authorization|api[-_]?key|cookie|signature)$/i;
// what people wrote or what carries it: texts, raw bodies, payloads, menus, flow vars, and
// the parameters of a failed query (a database error carries the values it was given)
const CONTENT_KEY = /^(text|texts|body|rawbody|payload|messagedata|menu|vars|params)$/i;
// keys whose bare digit strings are phone numbers
const PHONE_KEY = /^(to|from|phone|msisdn|recipient|sender|caller|callee|number|subject)$/i;

const E164_IN_TEXT = /(\+|%2B)(\d{3,11})(\d{4})(?!\d)/gi;
const BARE_PHONE = /^\d{6,11}(\d{4})$/;
const BEARER_IN_TEXT = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi;
// drizzle's "Failed query: ...\nparams: <every value>" error message
const QUERY_PARAMS_IN_TEXT = /(\bparams: )[^\n]*/g;
const SECRET_PARAM_IN_TEXT =
  /([?&;](?:token|access_token|api_key|apikey|key|password|secret|signature)=)[^&\s"#]+/gi;

/**
 * `+380501234567` -> `+********4567`: the last four digits stay, so a support engineer can
 * still tell two numbers apart.
 *
 * @example
 * maskPhone('+380501234567') // '+********4567'
 */
export function maskPhone(value: string): string {
  return value.replace(E164_IN_TEXT, (_m, plus: string, head: string, tail: string) => {
    return `${plus}${'*'.repeat(head.length)}${tail}`;
  });
}

/** Credentials and (unless `logPii`) phone numbers cut out of free text, such as a whole log line. */
export function scrubText(value: string, logPii = false): string {
  const out = value
    .replace(BEARER_IN_TEXT, `$1 ${REDACTED}`)
    .replace(SECRET_PARAM_IN_TEXT, `$1${REDACTED}`)
    .replace(QUERY_PARAMS_IN_TEXT, `$1${REDACTED}`);
  return logPii ? out : maskPhone(out);
}

function scrubString(value: string, logPii: boolean, phoneKey: boolean): string {
  let out = scrubText(value, logPii);
  if (!logPii) {
    if (phoneKey) {
      const bare = out.match(BARE_PHONE);
      if (bare) out = `${'*'.repeat(out.length - 4)}${bare[1]}`;
    }
  }
  return out;
}

const MAX_DEPTH = 8;

/** A copy of `value` with secrets and content removed and phone numbers masked. */
export function scrubLogValue(value: unknown, logPii = false, key = '', depth = 0): unknown {
  if (key !== '' && (SECRET_KEY.test(key) || CONTENT_KEY.test(key))) {
    return value === undefined || value === null ? value : REDACTED;
  }
  if (typeof value === 'string') return scrubString(value, logPii, PHONE_KEY.test(key));
  if (typeof value !== 'object' || value === null) return value;
  if (depth >= MAX_DEPTH) return '[too deep]';
  if (value instanceof Error) {
    return scrubLogValue(pino.stdSerializers.err(value), logPii, key, depth + 1);
  }
  if (Array.isArray(value)) return value.map((v) => scrubLogValue(v, logPii, key, depth + 1));
  if (value instanceof Date) return value;
  if (Buffer.isBuffer(value)) return `[${value.length} bytes]`;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubLogValue(v, logPii, k, depth + 1);
  return out;
}

// Everything the scrubbers above could change, looked for in the serialized line at once: a
// key that is secret, content or phone-like (with a digit string under it), an E.164 number,
// a credential or query parameters inside a string. A line with none of them (most request
// lines) is written as it is, which costs one regular expression instead of a parse and a
// rewrite. The look is wider than the rules, never narrower: anything it misses could not
// have been changed.
const MAYBE_SENSITIVE = new RegExp(
  [
    '(?:token|secret|password|passwd|authorization|api[-_]?key|cookie|signature)":',
    '"(?:text|texts|body|rawbody|payload|messagedata|menu|vars|params)":',
    // a digit string under a phone-like key, or an array under one (its strings at any depth)
    '"(?:to|from|phone|msisdn|recipient|sender|caller|callee|number|subject)":(?:"\\d|\\[)',
    '(?:\\+|%2B)\\d{7}',
    // no \b before these: in the serialized line a newline before them is the escape `\n`,
    // a letter (drizzle's "\nparams: ", a header dump's "\nBearer ...")
    '(?:Bearer|Basic)\\b',
    'params: ',
    '[?&;](?:token|access_token|api_key|apikey|key|password|secret|signature)=',
  ].join('|'),
  'i',
);

/** Whether a line nests deeper than scrubLogValue walks (it would cut it): counted crudely. */
function mayBeTooDeep(line: string): boolean {
  let open = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if ((c === 123 || c === 91) && ++open > MAX_DEPTH) return true; // { or [
  }
  return false;
}

/**
 * One finished log line, scrubbed: parsed, cleaned by key and by content, written again. It
 * runs on the line pino is about to write, so it covers what no per-key option reaches
 * (child bindings, the message string, serialized errors) whoever logged it.
 */
export function scrubLogLine(line: string, logPii = false): string {
  if (!MAYBE_SENSITIVE.test(line) && !mayBeTooDeep(line)) return line;
  return rewriteLogLine(line, logPii);
}

/** The slow path of scrubLogLine, for every line: parse, scrub, serialize again. */
export function rewriteLogLine(line: string, logPii = false): string {
  try {
    const value: unknown = JSON.parse(line);
    return `${JSON.stringify(scrubLogValue(value, logPii))}\n`;
  } catch {
    return scrubText(line, logPii);
  }
}

// how long a line may wait in the buffer before it is written anyway
const FLUSH_EVERY_MS = 200;

/**
 * stdout, written in blocks: a system call per line costs as much as answering a small
 * request on this kind of machine, so lines gather up to 8 KiB, or for at most
 * FLUSH_EVERY_MS, before one write. pino flushes what is left when the process exits (also
 * on an uncaught error); a SIGKILL loses at most the last FLUSH_EVERY_MS of lines.
 */
function bufferedStdout(): pino.DestinationStream {
  const dest = pino.destination({ dest: 1, sync: false, minLength: 8 * 1024 });
  const timer = setInterval(() => {
    try {
      dest.flush();
    } catch {
      clearInterval(timer); // closed: nothing more to write
    }
  }, FLUSH_EVERY_MS).unref();
  return dest;
}

/**
 * `destination`, written readable lines instead of the JSON ones it is given (already
 * scrubbed): `12:00:01.234 INFO: listening {"port":3000}`. Colours only on a terminal.
 */
export function prettyStream(
  destination: pino.DestinationStream,
  colorize = false,
): pino.DestinationStream {
  const prettify = loadPretty().prettyFactory({
    colorize,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
  });
  return { write: (line: string) => destination.write(prettify(line)) };
}

/** Whether `format` means readable lines here: `auto` asks whether stdout is a terminal. */
export function wantsPretty(
  format: LoggerOptions['format'],
  isTty: boolean = process.stdout.isTTY === true,
): boolean {
  return format === 'pretty' || (format !== 'json' && isTty);
}

/**
 * Creates the process logger: JSON lines on stdout (or on `destination`), or readable lines
 * when `format` says so (see wantsPretty). Takes the level, or the level, whether phone
 * numbers may be logged whole and the format.
 */
export function createLogger(
  options: string | LoggerOptions,
  destination?: pino.DestinationStream,
): Logger {
  const {
    level,
    logPii = false,
    format = 'json',
  } = typeof options === 'string' ? { level: options } : options;
  // a person reads these: each line at once, in order with what goes to stderr (the banner)
  const pretty = wantsPretty(format, destination ? false : undefined);
  const out =
    destination ?? (pretty ? pino.destination({ dest: 1, sync: true }) : bufferedStdout());
  return pino(
    {
      level,
      base: { service: 'switchboard' },
      hooks: { streamWrite: (line) => scrubLogLine(line, logPii) },
    },
    pretty ? prettyStream(out, destination === undefined && loadPretty().isColorSupported) : out,
  );
}
