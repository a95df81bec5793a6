import { randomBytes } from 'node:crypto';
import { type AppDeps, createApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { Database } from '../../src/db/client.ts';
import { createLogger } from '../../src/logger.ts';

/** A real app on a real database, called in-process with `app.request()`. */
export function buildTestApp(
  database: Database,
  overrides: Partial<AppDeps> & { env?: Record<string, string> } = {},
) {
  const { env, ...rest } = overrides;
  return createApp({
    config: loadConfig(env ?? {}),
    database,
    logger: createLogger('silent'),
    ...rest,
  });
}

/** An id no other test uses (tests never share rows). */
export function uniq(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

/**
 * `length` characters of random base64: it does not compress, as a repeated letter would, so
 * it is as long in an index entry as it looks (ids past MAX_ID_LENGTH).
 */
export function randomId(length: number): string {
  return randomBytes(Math.ceil((length * 3) / 4))
    .toString('base64')
    .slice(0, length);
}

/** A valid, unique Ukrainian mobile number. */
export function phone(): string {
  return `+38050${String(randomBytes(4).readUInt32BE(0) % 10_000_000).padStart(7, '0')}`;
}

export function json(body: unknown, init: RequestInit = {}): RequestInit {
  return {
    method: 'POST',
    ...init,
    headers: { 'content-type': 'application/json', ...(init.headers ?? {}) },
    body: JSON.stringify(body),
  };
}

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON and assert on its shape
export type Json = any;

/** The JSON body of a response, typed loosely: the assertions check its shape. */
export function readJson(res: Response): Promise<Json> {
  return res.json();
}
