/**
 * Readable log lines (LOG_FORMAT=pretty, or a terminal with LOG_FORMAT=auto) are made from the
 * scrubbed JSON line, so what test/privacy/logs.test.ts holds for JSON holds for them too: no
 * secret, no message text, phone numbers masked.
 */
import { describe, expect, it } from 'vitest';
import { createLogger, wantsPretty } from '../../src/logger.ts';
import { captureLog } from '../support/log-capture.ts';

describe('readable log lines', () => {
  it('are one line per entry, with the level and message, and no JSON envelope', () => {
    const out = captureLog();
    createLogger({ level: 'info', format: 'pretty' }, out.stream).info({ port: 3000 }, 'listening');
    const line = out.text();
    expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: listening \{"port":3000\}\n$/);
    expect(line).not.toContain('"level"');
    expect(line).not.toContain('service');
  });

  it('keep secrets, texts and phone numbers out, as the JSON lines do', () => {
    const out = captureLog();
    const to = '+380501234567';
    createLogger({ level: 'info', format: 'pretty' }, out.stream)
      .child({ apiToken: 'tok-in-binding' })
      .info(
        { to, password: 'hunter2-secret', text: 'Your code is 4242', auth: 'Bearer abcdefghijkl' },
        `sent to ${to}?token=query-secret`,
      );
    const line = out.text();
    expect(line).not.toMatch(/380501234567|tok-in-binding|hunter2-secret|4242|abcdefghijkl/);
    expect(line).not.toContain('query-secret');
    expect(line).toContain('+********4567');
    expect(line).toContain('[redacted]');
  });

  it('are chosen by LOG_FORMAT, and by the terminal when it is auto', () => {
    expect(wantsPretty('auto', true)).toBe(true);
    expect(wantsPretty('auto', false)).toBe(false);
    expect(wantsPretty('json', true)).toBe(false);
    expect(wantsPretty('pretty', false)).toBe(true);
    // a destination given (tests, a file): JSON unless pretty is asked for
    const out = captureLog();
    createLogger({ level: 'info', format: 'auto' }, out.stream).info('x');
    expect(JSON.parse(out.text())).toMatchObject({ msg: 'x' });
  });
});
