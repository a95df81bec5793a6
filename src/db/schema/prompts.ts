import { sql } from 'drizzle-orm';
import {
  bigserial,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { bytea } from './bytea.ts';

/**
 * Rendered prompt audio (src/speech/prompts.ts), one row per distinct file: keyed by the
 * SHA-256 of its bytes, served at `/prompts/{public_id}.{ext}` (public_id: an HMAC of the
 * hash, src/speech/ids.ts). `body` holds the bytes, or is null when PROMPTS_DIR keeps them as
 * files. `last_used_at` moves on every render that reuses the row, so removing audio no use
 * refers to any more never takes one a render has just handed out.
 */
export const promptAudio = pgTable('prompt_audio', {
  contentHash: text('content_hash').primaryKey(),
  publicId: text('public_id').notNull().unique('prompt_audio_public_id_key'),
  ext: text('ext').notNull(),
  contentType: text('content_type').notNull(),
  durationMs: integer('duration_ms').notNull(),
  sizeBytes: integer('size_bytes').notNull(),
  body: bytea('body'),
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  lastUsedAt: timestamp('last_used_at', { withTimezone: true, mode: 'date' })
    .notNull()
    .defaultNow(),
});

/**
 * Who a prompt was rendered for: its request hash (engine, voice, text, format) found again
 * without rendering, and the call it belongs to. A row without `call_id` is a shared prompt
 * (no one's details in it), kept; one with `call_id` is personal data, removed a grace period
 * after the call ends (or at `expires_at`), and with the person's calls on erasure.
 */
export const promptUses = pgTable(
  'prompt_uses',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    requestHash: text('request_hash').notNull(),
    callId: uuid('call_id'),
    contentHash: text('content_hash').notNull(),
    /** for a personal prompt with no call (yet): when it may go; null: with its call */
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('prompt_uses_shared_key').on(t.requestHash).where(sql`${t.callId} is null`),
    uniqueIndex('prompt_uses_call_key')
      .on(t.requestHash, t.callId)
      .where(sql`${t.callId} is not null`),
    index('prompt_uses_call_id_idx').on(t.callId),
    index('prompt_uses_content_hash_idx').on(t.contentHash),
    index('prompt_uses_expires_at_idx').on(t.expiresAt),
  ],
);

export type PromptAudioRow = typeof promptAudio.$inferSelect;

/**
 * A spoken prompt as a menu plays it: a `say:` text split at its `{{variables}}` into pieces
 * (src/speech/compose.ts), each piece audio of its own in `prompt_audio`, joined when served.
 * The row is written before anything is rendered (at flow load for a prompt without
 * variables, with its call otherwise), so the menu's URL is known at once; `parts` (the
 * pieces' content hashes, in order) is filled in when the pieces are rendered, just before
 * the call is dispatched. `pieces` holds the texts to render: a row with `call_id` is
 * personal data, removed with its call's prompts.
 */
export const promptCompositions = pgTable(
  'prompt_compositions',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    /** SHA-256 of the format and the pieces' request hashes: the ETag */
    compositionHash: text('composition_hash').notNull(),
    /** an HMAC of composition_hash: the URL's id */
    publicId: text('public_id').notNull(),
    callId: uuid('call_id'),
    lang: text('lang').notNull(),
    voice: text('voice'),
    rate: doublePrecision('rate'),
    /** `[{ text, personal }]`: what to say, in order */
    pieces: jsonb('pieces').notNull(),
    ext: text('ext').notNull(),
    contentType: text('content_type').notNull(),
    /** the pieces' content hashes once rendered; null until then */
    parts: jsonb('parts'),
    durationMs: integer('duration_ms'),
    renderedAt: timestamp('rendered_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('prompt_compositions_shared_key')
      .on(t.compositionHash)
      .where(sql`${t.callId} is null`),
    uniqueIndex('prompt_compositions_call_key')
      .on(t.compositionHash, t.callId)
      .where(sql`${t.callId} is not null`),
    index('prompt_compositions_public_id_idx').on(t.publicId),
    index('prompt_compositions_call_id_idx').on(t.callId),
    index('prompt_compositions_pending_idx').on(t.callId).where(sql`${t.renderedAt} is null`),
  ],
);
