/**
 * Where Postgres keeps its data and how much room is left there, for the growth bench's check
 * before it seeds (bench/growth.ts). The free space is read with statfs from this machine,
 * which only says something when Postgres runs here too: for another host, or a directory this
 * process cannot reach, `freeBytes` is undefined and `why` says so.
 *
 * @example
 * const disk = await dataDisk(db.sql, db.url);
 * if (disk.freeBytes !== undefined && disk.freeBytes < need) throw new Error('no room');
 */
import { statfsSync } from 'node:fs';
import type postgres from 'postgres';
import { settingBytes } from './options.ts';

export interface DataDisk {
  dataDirectory: string;
  /** bytes free to an unprivileged writer there; undefined when it cannot be read */
  freeBytes: number | undefined;
  why?: string;
  /** `max_wal_size`, in bytes: the WAL Postgres may keep between checkpoints */
  walBytes: number;
}

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1', '']);

export async function dataDisk(sql: postgres.Sql, url: string): Promise<DataDisk> {
  const [row] = await sql<{ dir: string; wal: string }[]>`
    select current_setting('data_directory') as dir, current_setting('max_wal_size') as wal`;
  const dataDirectory = row!.dir;
  const walBytes = settingBytes(row!.wal);
  const host = new URL(url).hostname;
  if (!LOCAL_HOSTS.has(host)) {
    return {
      dataDirectory,
      walBytes,
      freeBytes: undefined,
      why: `Postgres runs on ${host}, not here: its free disk cannot be checked`,
    };
  }
  try {
    const s = statfsSync(dataDirectory);
    return { dataDirectory, walBytes, freeBytes: s.bavail * s.bsize };
  } catch (err) {
    return {
      dataDirectory,
      walBytes,
      freeBytes: undefined,
      why: `statfs of ${dataDirectory} failed (${(err as Error).message}): free disk not checked`,
    };
  }
}
