/**
 * An upload read whole to a temporary file before anything is stored from it: a client that
 * sends its body slowly (or stalls) then holds a socket and a file, never a database
 * connection or an open transaction (a CSV campaign's rows go in transactions that last as
 * long as their inserts, not as long as the upload: src/campaigns/uploads.ts). The file is in
 * a private directory (mode 0700, made by `mkdtemp`) under `os.tmpdir()` (TMPDIR), removed
 * whatever happens.
 *
 * @example
 * const made = await withSpooledUpload(body, (file) => store(createReadStream(file)));
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { AppError } from '../errors.ts';
import type { Logger } from '../logger.ts';

/** The start of each spool directory's name under `os.tmpdir()` (tests look for it). */
export const SPOOL_DIR_PREFIX = 'switchboard-upload-';

/** The file the body is written to, in its spool directory. */
export const SPOOL_FILE_NAME = 'body';

/** A write refused for want of room: the disk (or the inodes) full, or a quota reached. */
function isOutOfSpace(code: unknown): boolean {
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/**
 * A temporary directory the server cannot write in: missing, not a directory (TMPDIR under a
 * file), read-only, or not the server's to write. A misconfiguration, not the client's doing.
 */
function isUnwritable(code: unknown): boolean {
  return (
    code === 'EACCES' ||
    code === 'EPERM' ||
    code === 'EROFS' ||
    code === 'ENOTDIR' ||
    code === 'ENOENT'
  );
}

/**
 * What a failed spool answers: a temporary directory full or that cannot be written is 503
 * `UNAVAILABLE` (a retry may find room, or the directory fixed), never a 500 with a stack, and
 * is logged to `logger` with its cause (the client is told no path); anything else (the body
 * over its limit, a client gone) as it was thrown.
 */
export function spoolFailure(err: unknown, logger?: Pick<Logger, 'warn'>): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  const full = isOutOfSpace(code);
  if (!full && !isUnwritable(code)) return err;
  logger?.warn({ err }, 'a CSV upload refused: the temporary directory cannot hold it (TMPDIR)');
  return new AppError(
    'UNAVAILABLE',
    full
      ? 'the server has no room to hold the upload (its temporary directory is full); retry shortly'
      : 'the server cannot hold the upload (its temporary directory cannot be written); retry later',
  );
}

/**
 * `body` written whole to a temporary file, then `use(file)`; the file and its directory are
 * removed once `use` ends, or at once when the body fails (its limit passed, the client gone)
 * or the file cannot be written (`spoolFailure`): `use` then never runs.
 */
export async function withSpooledUpload<T>(
  body: AsyncIterable<Uint8Array>,
  use: (file: string) => Promise<T>,
  /** where a temporary directory that cannot hold the upload is logged */
  logger?: Pick<Logger, 'warn'>,
): Promise<T> {
  let dir: string | undefined;
  try {
    let file: string;
    try {
      dir = await mkdtemp(join(tmpdir(), SPOOL_DIR_PREFIX));
      file = join(dir, SPOOL_FILE_NAME);
      await pipeline(body, createWriteStream(file, { flags: 'wx', mode: 0o600 }));
    } catch (err) {
      throw spoolFailure(err, logger);
    }
    return await use(file);
  } finally {
    // best effort: a file left behind must not turn a stored campaign into an error answered
    // (the client would retry it and store it twice)
    if (dir !== undefined) await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}
