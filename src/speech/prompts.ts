/**
 * The prompt service: text in, a URL the provider can fetch out. A render looks the request
 * up by its hash first (a hit renders nothing, so a restart or another instance renders
 * nothing twice); otherwise the engine synthesizes it, audio.ts encodes it in SPEECH_FORMAT,
 * and the store keeps it by its content hash, served at `PUBLIC_URL/prompts/{id}.{ext}` under
 * an HMAC of that hash (ids.ts), so a URL cannot be computed from a person's name.
 *
 * The HMAC key is PROMPT_SECRET, or, unset, a random one generated once and kept in the
 * `settings` table, so every instance on the database agrees without configuration (the same
 * pattern as the webhook secret). It is never logged and never leaves the process.
 *
 * Renders of one request in the same process share one synthesis (concurrent calls wait for
 * the first); across instances both may synthesize, and the store keeps one row.
 *
 * @example
 * const prompts = createPromptService({ db, engine, store, secret, format: 'wav8k', publicUrl });
 * const p = await prompts.render({ text: 'Hello Maria', lang: 'en' }, { callId });
 * // { id: 'q9y1V0…', ext: 'wav', url: 'https://sb.example/prompts/q9y1V0….wav', durationMs, contentType }
 */
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Queryable } from '../db/client.ts';
import { settings } from '../db/schema/index.ts';
import { encodeAudio, type SpeechAudioFormat, trimSilence } from './audio.ts';
import type { SpeechEngine, SpeechOptions } from './engine.ts';
import { createEspeakEngine } from './espeak.ts';
import { createHttpSpeechEngine } from './http-engine.ts';
import { audioContentHash, speechPublicId, speechRequestHash } from './ids.ts';
import type { PromptStore } from './store.ts';

/** What to say. */
export interface PromptRequest extends SpeechOptions {
  text: string;
  /**
   * A piece of a joined prompt (compose.ts): its silence is trimmed to PIECE_EDGE_MS at
   * either end, so joined pieces pause briefly, not for the engine's whole lead-in.
   */
  piece?: boolean;
}

/** The silence a piece keeps at each edge: a short pause where pieces join. */
export const PIECE_EDGE_MS = 90;

/** Whose prompt it is: a call's (personal data, removed after it) or, with neither, shared. */
export interface PromptScope {
  callId?: string;
  /** a personal prompt not tied to a call (yet): when it may be removed */
  expiresAt?: Date;
}

/** A rendered prompt, ready to hand to the provider. */
export interface RenderedPrompt {
  /** the public id (24 characters, base64url) */
  id: string;
  /** SHA-256 of the audio (hex) */
  contentHash: string;
  ext: string;
  /** PUBLIC_URL/prompts/{id}.{ext} */
  url: string;
  durationMs: number;
  contentType: string;
}

export interface PromptService {
  render(request: PromptRequest, scope?: PromptScope): Promise<RenderedPrompt>;
  /** The audio of a request, encoded in SPEECH_FORMAT but not stored (a console preview). */
  encode(request: PromptRequest): Promise<{ body: Uint8Array; durationMs: number }>;
  /**
   * The audio of requests that share language, voice and rate, encoded but not stored: in one
   * engine run when the engine can (`synthesizeMany`), else one by one.
   */
  encodeMany(requests: readonly PromptRequest[]): Promise<EncodedPrompt[]>;
  /** The public id of stored audio, under the current secret. */
  publicIdOf(contentHash: string): string;
}

/** Encoded audio with what the store keeps about it. */
export interface EncodedPrompt {
  body: Uint8Array;
  contentHash: string;
  ext: string;
  contentType: string;
  durationMs: number;
}

export interface PromptServiceDeps {
  engine: SpeechEngine;
  store: PromptStore;
  /** the public ids' HMAC key (`loadPromptSecret`) */
  secret: string;
  format: SpeechAudioFormat;
  /** PUBLIC_URL, without a trailing slash */
  publicUrl: string;
  clock: Clock;
}

export function createPromptService(deps: PromptServiceDeps): PromptService {
  const publicIdOf = (contentHash: string) => speechPublicId(deps.secret, contentHash);
  const running = new Map<string, Promise<RenderedPrompt>>();
  const toRendered = (p: {
    contentHash: string;
    publicId: string;
    ext: string;
    durationMs: number;
    contentType: string;
  }) => ({
    id: p.publicId,
    contentHash: p.contentHash,
    ext: p.ext,
    url: `${deps.publicUrl}/prompts/${p.publicId}.${p.ext}`,
    durationMs: p.durationMs,
    contentType: p.contentType,
  });

  const optionsOf = (request: PromptRequest): SpeechOptions => {
    const options: SpeechOptions = { lang: request.lang };
    if (request.voice !== undefined) options.voice = request.voice;
    if (request.rate !== undefined) options.rate = request.rate;
    return options;
  };

  const encoded = (request: PromptRequest, speech: { samples: Int16Array; sampleRate: number }) => {
    const samples = request.piece
      ? trimSilence(speech.samples, speech.sampleRate, PIECE_EDGE_MS)
      : speech.samples;
    return {
      encoded: encodeAudio(samples, speech.sampleRate, deps.format),
      durationMs: Math.round((samples.length / speech.sampleRate) * 1000),
    };
  };

  async function synthesize(request: PromptRequest) {
    return encoded(request, await deps.engine.synthesize(request.text, optionsOf(request)));
  }

  async function renderNow(
    request: PromptRequest,
    scope: PromptScope,
    requestHash: string,
  ): Promise<RenderedPrompt> {
    const found = await deps.store.find(requestHash, scope, publicIdOf, deps.clock.now());
    if (found) return toRendered(found);
    const { encoded, durationMs } = await synthesize(request);
    const contentHash = audioContentHash(encoded.body);
    const stored = {
      contentHash,
      publicId: publicIdOf(contentHash),
      ext: encoded.extension,
      contentType: encoded.contentType,
      durationMs,
    };
    await deps.store.save(
      {
        ...stored,
        requestHash,
        body: encoded.body,
        ...(scope.callId !== undefined && { callId: scope.callId }),
        ...(scope.expiresAt !== undefined && { expiresAt: scope.expiresAt }),
      },
      deps.clock.now(),
    );
    return toRendered(stored);
  }

  return {
    async encode(request) {
      const { encoded, durationMs } = await synthesize(request);
      return { body: encoded.body, durationMs };
    },
    publicIdOf,
    async encodeMany(requests) {
      const first = requests[0];
      if (!first) return [];
      const speeches = deps.engine.synthesizeMany
        ? await deps.engine.synthesizeMany(
            requests.map((r) => r.text),
            optionsOf(first),
          )
        : await Promise.all(requests.map((r) => deps.engine.synthesize(r.text, optionsOf(r))));
      return speeches.map((speech, i) => {
        const { encoded: file, durationMs } = encoded(requests[i]!, speech);
        return {
          body: file.body,
          contentHash: audioContentHash(file.body),
          ext: file.extension,
          contentType: file.contentType,
          durationMs,
        };
      });
    },
    render(request, scope = {}) {
      const requestHash = speechRequestHash({
        engine: request.piece ? pieceEngine(deps.engine) : deps.engine,
        lang: request.lang,
        ...(request.voice !== undefined && { voice: request.voice }),
        ...(request.rate !== undefined && { rate: request.rate }),
        text: request.text.trim(),
        format: deps.format,
      });
      // one synthesis per request and scope in this process at a time
      const key = `${requestHash} ${scope.callId ?? ''}`;
      const pending = running.get(key);
      if (pending) return pending;
      const started = renderNow(request, scope, requestHash).finally(() => running.delete(key));
      running.set(key, started);
      return started;
    },
  };
}

/** A piece's audio is trimmed (PIECE_EDGE_MS): another file than the whole text's, another key. */
export function pieceEngine(engine: { name: string; version: string }) {
  return { name: engine.name, version: `${engine.version}/piece${PIECE_EDGE_MS}` };
}

export const PROMPT_SECRET_KEY = 'prompt_secret';

/**
 * The public ids' key: PROMPT_SECRET when set; else the one kept in `settings`, generated by
 * the first instance to ask (ON CONFLICT DO NOTHING, then read back, so instances starting
 * together agree). Setting PROMPT_SECRET later changes every id: old URLs stop working, and
 * each prompt gets its new id at its next render.
 */
export async function loadPromptSecret(
  db: Queryable,
  config: { promptSecret: string | undefined },
): Promise<string> {
  if (config.promptSecret !== undefined) return config.promptSecret;
  await db
    .insert(settings)
    .values({ key: PROMPT_SECRET_KEY, value: randomBytes(32).toString('base64url') })
    .onConflictDoNothing({ target: settings.key });
  const [row] = await db
    .select({ value: settings.value })
    .from(settings)
    .where(eq(settings.key, PROMPT_SECRET_KEY));
  if (!row) throw new Error('no prompt secret could be read or generated');
  return row.value;
}

/** The engine SPEECH_ENGINE names: eSpeak NG in process, or the HTTP service. */
export function speechEngineFor(speech: Config['speech']): SpeechEngine {
  if (speech.engine === 'http') {
    if (speech.httpUrl === undefined) throw new Error('SPEECH_HTTP_URL is not set');
    return createHttpSpeechEngine({
      url: speech.httpUrl,
      languages: speech.httpLanguages.map((lang) => ({ lang, name: lang })),
    });
  }
  return createEspeakEngine();
}
