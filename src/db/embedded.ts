/**
 * The embedded engine (PGlite) as a server runs it, set for memory. PGlite is Postgres
 * compiled to WebAssembly: its memory is one WASM memory that grows and never shrinks, so
 * every page the engine touches once stays in the server's RSS for good. Measured on a
 * fresh DATA_DIR (docs/performance.md, "Memory on the embedded database"), the server idled
 * at ~830 MB with PGlite's defaults, ~500 MB of it the engine's.
 *
 * @example
 * const client = await createEmbedded('./.data/pgdata');
 * await client.query('select 1');
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import type { PGlite } from '@electric-sql/pglite';
import { startIdleGc } from './idle-gc.ts';

/** Settings given to the engine at start (`-c name=value`), on top of PGlite's own. */
export const EMBEDDED_SETTINGS: readonly string[] = [
  // the buffer cache lives in the WASM memory, zeroed at start: the default 128 MB was ~140
  // MB of RSS before the first query, 8 MB ~8 MB, 4 MB ~4 MB; what does not fit is read from
  // the OS's page cache
  'shared_buffers=4MB',
  // what one VACUUM or CREATE INDEX may take (default 64 MB); once touched it stays resident
  'maintenance_work_mem=16MB',
  // PGlite runs one backend (single-user mode); the default 100 sized the shared memory's
  // per-backend arrays and lock tables for 100: ~4 MB of the WASM memory, resident from start
  'max_connections=2',
];

/**
 * Opens (creating it when missing) the PGlite data directory `path` with EMBEDDED_SETTINGS,
 * with V8 set for memory (below) and a full collection whenever the process goes idle
 * (idle-gc.ts). The `@electric-sql/pglite` module is loaded only here: it costs ~40 MB, and a
 * server on Postgres never needs it.
 */
export async function createEmbedded(path: string): Promise<PGlite> {
  baselineWasmOnly();
  heapForSize();
  startIdleGc();
  const { PGlite } = await import('@electric-sql/pglite');
  const startParams = [
    ...PGlite.defaultStartParams,
    ...EMBEDDED_SETTINGS.flatMap((s) => ['-c', s]),
  ];
  await initInChild(path, startParams);
  const client = new PGlite(path, { startParams });
  await client.waitReady;
  return client;
}

/**
 * WebAssembly compiled once, by V8's baseline compiler (Liftoff), never recompiled by its
 * optimizing one (TurboFan). TurboFan recompiled the engine's hot functions on background
 * threads, whose allocator kept the memory afterwards: ~45 MB of RSS at rest, ~70 MB once
 * the server had worked, for no CPU saved (a transaction loop on PGlite took as much CPU
 * either way; docs/performance.md). The engine is the only WebAssembly a server runs much
 * of, and this is set only when it is embedded: on Postgres nothing changes. A
 * `--liftoff-only` or `--no-liftoff-only` given to node (command line or NODE_OPTIONS) wins.
 */
function baselineWasmOnly(): void {
  const given = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) =>
    /liftoff[-_]only/.test(a),
  );
  if (!given) setFlagsFromString('--liftoff-only');
}

/**
 * V8 set to favour memory over speed (`--optimize-for-size`), only when the engine is
 * embedded. Its memory reducer then collects once the server goes quiet and gives back the
 * young generation's pages; by default it waits for an allocation rate below ~1 MB/s, which
 * the workers' polls of the engine (~45 statements/s, ~4.7 MB/s) never fall to, so an idle
 * server kept a full young generation and every object promoted since its last collection.
 * Measured with max_connections=2 and the smaller shared_buffers above (bench (memory), on a
 * machine shared with other benches): RSS after 60 s idle 199.7 MB against 204-208 MB
 * before the three, walk-through peak 277.8 MB against 292-295 MB; the server's CPU per
 * request of that part's load about 10% more (more, smaller collections), the trade this
 * makes. An `--optimize-for-size` or `--no-optimize-for-size`
 * given to node wins.
 */
function heapForSize(): void {
  const given = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) =>
    /optimize[-_]for[-_]size/.test(a),
  );
  if (!given) setFlagsFromString('--optimize-for-size');
}

const execFileAsync = promisify(execFile);

/**
 * Creates the data directory in a child process when it does not exist yet. PGlite creates
 * one by running initdb in a second engine of its own, in memory, and copying the result
 * over: ~450 MB of WASM memory that stayed in the server until a full garbage collection
 * (none comes while it idles), and ~170 MB even after one. A child process hands all of it
 * back to the OS when it exits, and the server opens the directory as on any later start.
 */
async function initInChild(path: string, startParams: string[]): Promise<void> {
  if (existsSync(join(path, 'PG_VERSION'))) return;
  const entry = pathToFileURL(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
  const script = [
    `const { PGlite } = await import(${JSON.stringify(entry.href)});`,
    `const pg = new PGlite(${JSON.stringify(path)}, { startParams: ${JSON.stringify(startParams)} });`,
    'await pg.waitReady;',
    'await pg.close();',
  ].join('\n');
  try {
    // --liftoff-only: initdb runs most of the engine's code once; TurboFan's work for it was
    // 40% of the child's CPU (4.2 s against 2.5 s)
    const args = ['--liftoff-only', '--input-type=module', '-e', script];
    await execFileAsync(process.execPath, args, {
      maxBuffer: 16 * 2 ** 20,
    });
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new Error(`could not create the embedded database in ${path}: ${stderr || err}`, {
      cause: err,
    });
  }
}
