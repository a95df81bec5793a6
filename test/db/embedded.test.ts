/**
 * The embedded engine as a server opens it (src/db/embedded.ts): a fresh data directory is
 * created (in a child process) and reopened with the memory settings, and what was written
 * is there on the next open; a directory that cannot be created fails with a message naming
 * it. The memory itself is the bench's to measure (`BENCH_ONLY=memory npm run bench`).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createEmbedded, EMBEDDED_SETTINGS } from '../../src/db/embedded.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-embedded-'));
  dirs.push(dir);
  return dir;
};

describe('createEmbedded', () => {
  it('creates a fresh data directory, runs with the memory settings, and reopens it', async () => {
    const path = join(freshDir(), 'pgdata');
    const first = await createEmbedded(path);
    try {
      expect(existsSync(join(path, 'PG_VERSION'))).toBe(true);
      for (const setting of EMBEDDED_SETTINGS) {
        const [name, value] = setting.split('=') as [string, string];
        const { rows } = await first.query<Record<string, string>>(`show ${name}`);
        expect(rows[0]?.[name]).toBe(value);
      }
      await first.exec('create table kept (n int); insert into kept values (42);');
    } finally {
      await first.close();
    }
    const again = await createEmbedded(path);
    try {
      const { rows } = await again.query<{ n: number }>('select n from kept');
      expect(rows).toEqual([{ n: 42 }]);
    } finally {
      await again.close();
    }
  }, 120_000);

  it('names the directory when it cannot be created', async () => {
    const dir = freshDir();
    mkdirSync(join(dir, 'parent'));
    // a file where the data directory's parent should be: neither engine can make it
    writeFileSync(join(dir, 'parent', 'blocked'), '');
    const path = join(dir, 'parent', 'blocked', 'pgdata');
    await expect(createEmbedded(path)).rejects.toThrow(
      `could not create the embedded database in ${path}`,
    );
  }, 60_000);
});
