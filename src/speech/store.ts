/**
 * Where rendered prompts live: metadata always in Postgres (`prompt_audio`, `prompt_uses`,
 * src/db/schema/prompts.ts), the audio bytes in the same row (`bytea`) or, with PROMPTS_DIR,
 * as one file per content hash in that directory. Either way every instance that shares the
 * database (and the directory) serves the same audio, and a restart renders nothing twice.
 *
 * Writes are idempotent: a file is named by its content hash and written atomically (a
 * temporary name, then a rename); rows are inserted ON CONFLICT, so instances rendering the
 * same text at once store one audio row and one use.
 *
 * @example
 * const store = createPromptStore(db, { dir: config.speech.promptsDir });
 * await store.save({ requestHash, contentHash, publicId, ext: 'wav', ... , body }, new Date());
 * const file = await store.read('q9y1V0...'); // { body, contentType, contentHash, ... }
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { and, eq, inArray, isNull, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { promptAudio, promptUses } from '../db/schema/index.ts';

/** A stored prompt as a render hands it out. */
export interface StoredPrompt {
  contentHash: string;
  publicId: string;
  ext: string;
  contentType: string;
  durationMs: number;
}

/** A prompt to store: the audio, what it was rendered from, and whom for. */
export interface PromptToSave extends StoredPrompt {
  requestHash: string;
  body: Uint8Array;
  /** the call it belongs to (personal data); unset: a shared prompt */
  callId?: string;
  /** a personal prompt with no call yet: when it may be removed */
  expiresAt?: Date;
}

/** An audio file to serve. */
export interface PromptFile extends StoredPrompt {
  body: Uint8Array;
  /** some use of it is shared (no call): nobody's details in it */
  shared: boolean;
}

/** An audio file kept in PROMPTS_DIR, to remove once its row is gone. */
export interface PromptFileName {
  contentHash: string;
  ext: string;
}

export interface PromptStore {
  /** `directory` with PROMPTS_DIR, else `database` */
  readonly kind: 'database' | 'directory';
  /**
   * The prompt already rendered for `requestHash` (for `callId`, or shared when unset),
   * marking its audio as used now and naming it `publicId` (the id under the current
   * secret); undefined when none is stored (or its file is gone), so the caller renders.
   * A hit for a call also records the use for that call, so its removal takes it along.
   */
  find(
    requestHash: string,
    scope: { callId?: string; expiresAt?: Date },
    publicIdOf: (contentHash: string) => string,
    now: Date,
  ): Promise<StoredPrompt | undefined>;
  /** Stores audio and its use; storing the same again changes nothing but `last_used_at`. */
  save(prompt: PromptToSave, now: Date): Promise<void>;
  /** The audio served under `publicId`, or undefined. `publicId` must have passed `isSpeechPublicId`. */
  read(publicId: string): Promise<PromptFile | undefined>;
  /**
   * The audio of these content hashes, in the order given (a hash may repeat); undefined
   * when any of them is gone.
   */
  bodies(contentHashes: readonly string[]): Promise<Uint8Array[] | undefined>;
  /** Records uses of stored audio: a call's (a piece with their details), or shared (null). */
  addUses(
    uses: readonly { requestHash: string; callId: string | null; contentHash: string }[],
    now: Date,
  ): Promise<void>;
  /**
   * The audio stored for any of these request hashes (any use: shared or a call's), whose
   * bytes are there; one query.
   */
  findAny(
    requestHashes: readonly string[],
  ): Promise<Map<string, { contentHash: string; durationMs: number }>>;
  /** Stores audio rows (and files) in one statement; the same audio again is marked used. */
  saveAudio(audio: readonly (StoredPrompt & { body: Uint8Array })[], now: Date): Promise<void>;
  /** Removes PROMPTS_DIR files whose rows are gone (nothing to do in the database store). */
  removeFiles(files: readonly PromptFileName[]): Promise<void>;
}

const HASH = /^[0-9a-f]{64}$/;
const EXT = /^[a-z0-9]{1,5}$/;

/**
 * The file of a content hash in `dir`. Both parts are checked against strict patterns (they
 * come from our own rows, never from a request), so no name can leave the directory.
 */
export function promptFilePath(dir: string, file: PromptFileName): string {
  if (!HASH.test(file.contentHash) || !EXT.test(file.ext)) {
    throw new RangeError('not a prompt file name');
  }
  return join(resolve(dir), `${file.contentHash}.${file.ext}`);
}

export function createPromptStore(db: Db, options: { dir?: string | undefined } = {}): PromptStore {
  const dir = options.dir;

  async function writeBody(file: PromptFileName, body: Uint8Array): Promise<void> {
    if (dir === undefined) return;
    const path = promptFilePath(dir, file);
    await mkdir(resolve(dir), { recursive: true });
    // a temporary name in the same directory, then an atomic rename: a reader never sees
    // half a file, and two instances writing the same hash write the same bytes
    const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(temporary, body, { mode: 0o640 });
    await rename(temporary, path);
  }

  async function fileExists(file: PromptFileName): Promise<boolean> {
    if (dir === undefined) return true;
    try {
      return (await stat(promptFilePath(dir, file))).isFile();
    } catch {
      return false;
    }
  }

  return {
    kind: dir === undefined ? 'database' : 'directory',

    async find(requestHash, scope, publicIdOf, now) {
      // this scope's own use first (a shared render, or this call's)
      const [use] = await db
        .select({ contentHash: promptUses.contentHash })
        .from(promptUses)
        .where(
          and(
            eq(promptUses.requestHash, requestHash),
            scope.callId === undefined
              ? isNull(promptUses.callId)
              : eq(promptUses.callId, scope.callId),
          ),
        )
        .limit(1);
      let contentHash = use?.contentHash;
      if (contentHash === undefined) {
        // the same words rendered for another call (or shared): the audio is reused, the use
        // is this scope's own
        const [other] = await db
          .select({ contentHash: promptUses.contentHash })
          .from(promptUses)
          .where(eq(promptUses.requestHash, requestHash))
          .limit(1);
        contentHash = other?.contentHash;
      }
      if (contentHash === undefined) return undefined;
      const publicId = publicIdOf(contentHash);
      return db.transaction(async (tx) => {
        // the update locks the audio row: removal of unused audio (privacy/retention.ts)
        // re-reads last_used_at after it and keeps the row
        const [audio] = await tx
          .update(promptAudio)
          .set({ lastUsedAt: now, publicId })
          .where(eq(promptAudio.contentHash, contentHash))
          .returning({
            contentHash: promptAudio.contentHash,
            publicId: promptAudio.publicId,
            ext: promptAudio.ext,
            contentType: promptAudio.contentType,
            durationMs: promptAudio.durationMs,
          });
        if (!audio || !(await fileExists(audio))) return undefined;
        if (!use) {
          await tx
            .insert(promptUses)
            .values({
              requestHash,
              callId: scope.callId ?? null,
              contentHash,
              expiresAt: scope.expiresAt ?? null,
              createdAt: now,
            })
            .onConflictDoNothing();
        }
        return audio;
      });
    },

    async save(prompt, now) {
      await writeBody(prompt, prompt.body);
      await db.transaction(async (tx) => {
        await tx
          .insert(promptAudio)
          .values({
            contentHash: prompt.contentHash,
            publicId: prompt.publicId,
            ext: prompt.ext,
            contentType: prompt.contentType,
            durationMs: prompt.durationMs,
            sizeBytes: prompt.body.byteLength,
            body: dir === undefined ? prompt.body : null,
            createdAt: now,
            lastUsedAt: now,
          })
          // the same audio from another request or instance: keep the row, mark it used
          .onConflictDoUpdate({
            target: promptAudio.contentHash,
            set: { lastUsedAt: now, publicId: prompt.publicId },
          });
        await tx
          .insert(promptUses)
          .values({
            requestHash: prompt.requestHash,
            callId: prompt.callId ?? null,
            contentHash: prompt.contentHash,
            expiresAt: prompt.expiresAt ?? null,
            createdAt: now,
          })
          // either partial unique index (shared, or per call): another render got there first
          .onConflictDoNothing();
      });
    },

    async read(publicId) {
      const [row] = await db
        .select({
          contentHash: promptAudio.contentHash,
          publicId: promptAudio.publicId,
          ext: promptAudio.ext,
          contentType: promptAudio.contentType,
          durationMs: promptAudio.durationMs,
          body: promptAudio.body,
          // spelled out: drizzle leaves a one-table query's columns unqualified
          shared: sql<boolean>`exists (select 1 from prompt_uses u
            where u.content_hash = prompt_audio.content_hash and u.call_id is null)`,
        })
        .from(promptAudio)
        .where(eq(promptAudio.publicId, publicId));
      if (!row) return undefined;
      const { body, ...meta } = row;
      // a row's own bytes first: audio stored before PROMPTS_DIR was set is still served
      if (body) return { ...meta, body: new Uint8Array(body) };
      if (dir === undefined) return undefined;
      try {
        return { ...meta, body: new Uint8Array(await readFile(promptFilePath(dir, meta))) };
      } catch {
        return undefined;
      }
    },

    async bodies(contentHashes) {
      const wanted = [...new Set(contentHashes)];
      if (wanted.length === 0) return [];
      const rows = await db
        .select({
          contentHash: promptAudio.contentHash,
          ext: promptAudio.ext,
          body: promptAudio.body,
        })
        .from(promptAudio)
        .where(inArray(promptAudio.contentHash, wanted));
      const byHash = new Map<string, Uint8Array>();
      for (const row of rows) {
        if (row.body) byHash.set(row.contentHash, new Uint8Array(row.body));
        else if (dir !== undefined) {
          try {
            byHash.set(row.contentHash, new Uint8Array(await readFile(promptFilePath(dir, row))));
          } catch {
            // the file is gone: the caller renders again
          }
        }
      }
      const out: Uint8Array[] = [];
      for (const hash of contentHashes) {
        const body = byHash.get(hash);
        if (!body) return undefined;
        out.push(body);
      }
      return out;
    },

    async addUses(uses, now) {
      for (let i = 0; i < uses.length; i += 1000) {
        await db
          .insert(promptUses)
          .values(uses.slice(i, i + 1000).map((u) => ({ ...u, createdAt: now })))
          .onConflictDoNothing();
      }
    },

    async findAny(requestHashes) {
      const found = new Map<string, { contentHash: string; durationMs: number }>();
      if (requestHashes.length === 0) return found;
      const rows = await db
        .selectDistinctOn([promptUses.requestHash], {
          requestHash: promptUses.requestHash,
          contentHash: promptAudio.contentHash,
          durationMs: promptAudio.durationMs,
          ext: promptAudio.ext,
        })
        .from(promptUses)
        .innerJoin(promptAudio, eq(promptAudio.contentHash, promptUses.contentHash))
        .where(inArray(promptUses.requestHash, [...requestHashes]));
      for (const row of rows) {
        if (await fileExists(row)) {
          found.set(row.requestHash, { contentHash: row.contentHash, durationMs: row.durationMs });
        }
      }
      return found;
    },

    async saveAudio(list, now) {
      // one row per content hash: a statement may not update the same row twice
      const audio = [...new Map(list.map((a) => [a.contentHash, a])).values()];
      for (const a of audio) await writeBody(a, a.body);
      for (let i = 0; i < audio.length; i += 200) {
        await db
          .insert(promptAudio)
          .values(
            audio.slice(i, i + 200).map((a) => ({
              contentHash: a.contentHash,
              publicId: a.publicId,
              ext: a.ext,
              contentType: a.contentType,
              durationMs: a.durationMs,
              sizeBytes: a.body.byteLength,
              body: dir === undefined ? a.body : null,
              createdAt: now,
              lastUsedAt: now,
            })),
          )
          .onConflictDoUpdate({
            target: promptAudio.contentHash,
            set: { lastUsedAt: now, publicId: sql`excluded.public_id` },
          });
      }
    },

    async removeFiles(files) {
      if (dir === undefined) return;
      for (const file of files) {
        if (!HASH.test(file.contentHash) || !EXT.test(file.ext)) continue;
        // a render may have stored the same audio again since the row went: keep its file
        const [again] = await db
          .select({ one: sql<number>`1` })
          .from(promptAudio)
          .where(eq(promptAudio.contentHash, file.contentHash));
        if (!again) await rm(promptFilePath(dir, file), { force: true });
      }
    },
  };
}
