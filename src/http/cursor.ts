/**
 * Cursors over lists ordered by a numeric id (newest first): the last id of a page, in
 * base64url, so clients pass it back unchanged. One rule for every such list (the audit log,
 * an endpoint's attempts and deliveries); a cursor this API did not make is a 400 naming it.
 *
 * @example
 * const next = encodeIdCursor(412); // 'NDEy'
 * decodeIdCursor(next); // 412
 */
import { AppError } from '../errors.ts';

export function encodeIdCursor(id: number): string {
  return Buffer.from(String(id)).toString('base64url');
}

export function decodeIdCursor(cursor: string): number {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[1-9]\d{0,15}$/.test(id)) {
    throw new AppError('VALIDATION_ERROR', 'cursor is not one this API returned', [
      { path: 'cursor', code: 'INVALID_CURSOR', message: 'pass nextCursor from a previous page' },
    ]);
  }
  return Number(id);
}
