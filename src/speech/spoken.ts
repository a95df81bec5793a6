/**
 * Spoken prompts of flows, from `say:` to the URL a menu plays (docs/speech.md):
 *
 * - `plan` (at call start, synchronous and cheap): the prompt's pieces (compose.ts), each
 *   piece's request hash, the composition's hash and its public id, an HMAC of that hash, so
 *   the menu's `introUrl` is known before any audio exists;
 * - `prepareFlow` (when a flow loads): the prompts without params are stored and rendered
 *   once, shared by every call;
 * - `renderPending` (the dispatcher, before each round it sends): each call's own prompts
 *   are rendered, a piece at a time, reusing every piece already rendered (the flow's words,
 *   a name another call had), so the provider never waits on synthesis;
 * - `read` (GET /prompts/{id}): the pieces' audio joined into one file; a prompt not rendered
 *   yet, or whose piece went meanwhile, is rendered there and then.
 *
 * @example
 * const spoken = createSpokenPrompts({ db, prompts, store, secret, format, publicUrl, engine, clock });
 * const plan = spoken.plan({ say: 'Hello {{name}}' }, 'en', { name: 'Maria' });
 * plan.url // https://sb.example/prompts/Xq….wav, rendered by renderPending()
 */
import { createHash } from 'node:crypto';
import { eq, isNull, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Db, Queryable } from '../db/client.ts';
import { promptCompositions } from '../db/schema/index.ts';
import { AppError } from '../errors.ts';
import type { SpeechCapabilities } from '../flows/checks.ts';
import type { CompiledFlow } from '../flows/compile.ts';
import type { SpokenPrompt } from '../flows/unroll.ts';
import { joinAudio, type SpeechAudioFormat } from './audio.ts';
import { promptPieces } from './compose.ts';
import type { SpeechEngine } from './engine.ts';
import { speechPublicId, speechRequestHash } from './ids.ts';
import {
  createPromptService,
  type PromptRequest,
  type PromptService,
  pieceEngine,
  speechEngineFor,
} from './prompts.ts';
import type { PromptStore } from './store.ts';

/** A spoken prompt planned for a call (or shared), before or after rendering. */
export interface PlannedPrompt {
  compositionHash: string;
  publicId: string;
  /** PUBLIC_URL/prompts/{publicId}.{ext} */
  url: string;
  lang: string;
  voice?: string;
  rate?: number;
  pieces: Array<{ text: string; personal: boolean; requestHash: string }>;
  /** some piece holds the call's params: the prompt belongs to the call */
  personal: boolean;
}

/** A joined prompt to serve. */
export interface SpokenFile {
  body: Uint8Array;
  contentType: string;
  ext: string;
  /** the composition's hash: the ETag */
  etag: string;
  /** no piece holds anyone's details */
  shared: boolean;
}

export interface SpokenPrompts {
  plan(prompt: SpokenPrompt, lang: string, vars: Readonly<Record<string, unknown>>): PlannedPrompt;
  /** The rows that store a call's planned prompts (inserted with the call). */
  rowsFor(plans: readonly PlannedPrompt[], callId: string, now: Date): CompositionRow[];
  /** Stores the flow's prompts without params and renders them (once, shared). */
  prepareFlow(compiled: CompiledFlow): Promise<void>;
  /**
   * Renders the prompts not rendered yet, oldest first (at most PENDING_BATCH): the
   * dispatcher calls it before each round, so a call's prompts are ready when it is sent.
   * One render at a time per process; a second caller waits for it and then looks again.
   */
  renderPending(): Promise<number>;
  /**
   * A prompt's audio with these vars, for people to hear (the console): the flow's words
   * from the store, the vars' pieces rendered in memory and never stored.
   */
  preview(
    prompt: SpokenPrompt,
    lang: string,
    vars: Readonly<Record<string, unknown>>,
  ): Promise<{ body: Uint8Array; contentType: string; ext: string }>;
  /** The joined audio served under `publicId` (rendered now when it must be). */
  read(publicId: string, ext: string): Promise<SpokenFile | undefined>;
}

export type CompositionRow = typeof promptCompositions.$inferInsert;

export interface SpokenPromptsDeps {
  db: Db;
  prompts: PromptService;
  store: PromptStore;
  engine: Pick<SpeechEngine, 'name' | 'version'>;
  secret: string;
  format: SpeechAudioFormat;
  /** PUBLIC_URL without a trailing slash */
  publicUrl: string;
  clock: Clock;
}

const EXT: Record<SpeechAudioFormat, { ext: string; contentType: string }> = {
  wav8k: { ext: 'wav', contentType: 'audio/wav' },
  wav16k: { ext: 'wav', contentType: 'audio/wav' },
  mp3: { ext: 'mp3', contentType: 'audio/mpeg' },
};

/** Shared prompts planned, by their `say:` object, language and format (flows are few). */
const PLAN_CACHE_LIMIT = 10_000;
/** Pieces remembered as rendered (oldest forgotten first). */
const RENDERED_CACHE_LIMIT = 50_000;
/** Prompts rendered per dispatcher round at most (the rest in the next). */
const PENDING_BATCH = 2000;
/** Texts one engine run says at most (its start is most of a short text's cost). */
const RENDER_BATCH = 40;

export function createSpokenPrompts(deps: SpokenPromptsDeps): SpokenPrompts {
  const { ext, contentType } = EXT[deps.format];
  const engine = pieceEngine(deps.engine);
  // a flow's prompts without params are planned once: every call of the flow asks
  const sharedPlans = new Map<string, PlannedPrompt>();

  function plan(
    prompt: SpokenPrompt,
    lang: string,
    vars: Readonly<Record<string, unknown>>,
  ): PlannedPrompt {
    const fixed = !prompt.say.includes('{{');
    const cacheKey = fixed
      ? `${lang}\0${prompt.voice ?? ''}\0${prompt.rate ?? ''}\0${prompt.say}`
      : '';
    const cached = fixed ? sharedPlans.get(cacheKey) : undefined;
    if (cached) return cached;
    const pieces = promptPieces(prompt.say, vars).map((p) => ({
      ...p,
      requestHash: speechRequestHash({
        engine,
        lang,
        ...(prompt.voice !== undefined && { voice: prompt.voice }),
        ...(prompt.rate !== undefined && { rate: prompt.rate }),
        text: p.text,
        format: deps.format,
      }),
    }));
    if (pieces.length === 0) {
      throw new AppError(
        'INVALID_VARS',
        `the prompt "${prompt.say}" has nothing to say with these vars`,
        [{ path: 'vars', code: 'EMPTY_TEXT', message: `"${prompt.say}" is empty once filled in` }],
      );
    }
    const compositionHash = createHash('sha256')
      .update(
        JSON.stringify(['switchboard-spoken-1', deps.format, pieces.map((p) => p.requestHash)]),
      )
      .digest('hex');
    const publicId = speechPublicId(deps.secret, compositionHash);
    const planned: PlannedPrompt = {
      compositionHash,
      publicId,
      url: `${deps.publicUrl}/prompts/${publicId}.${ext}`,
      lang,
      ...(prompt.voice !== undefined && { voice: prompt.voice }),
      ...(prompt.rate !== undefined && { rate: prompt.rate }),
      pieces,
      personal: pieces.some((p) => p.personal),
    };
    if (fixed) {
      if (sharedPlans.size >= PLAN_CACHE_LIMIT) sharedPlans.clear();
      sharedPlans.set(cacheKey, planned);
    }
    return planned;
  }

  function rowOf(p: PlannedPrompt, callId: string | null, now: Date): CompositionRow {
    return {
      compositionHash: p.compositionHash,
      publicId: p.publicId,
      callId,
      lang: p.lang,
      voice: p.voice ?? null,
      rate: p.rate ?? null,
      pieces: p.pieces,
      ext,
      contentType,
      createdAt: now,
    };
  }

  type Pending = {
    id: number;
    callId: string | null;
    lang: string;
    voice: string | null;
    rate: number | null;
    pieces: Array<{ text: string; personal: boolean; requestHash: string }>;
  };

  let pending: Promise<number> | undefined;
  // Pieces rendered before, by request hash: a call's prompts then cost no query per piece
  // (the flow's words are in every call; names and dates repeat). A stale entry (its audio
  // removed since) only costs `read` a fresh render.
  const rendered = new Map<string, { contentHash: string; durationMs: number }>();

  // shared pieces whose shared use this process has recorded (it is written once)
  const sharedUses = new Set<string>();

  const remember = (hash: string, audio: { contentHash: string; durationMs: number }) => {
    if (rendered.size >= RENDERED_CACHE_LIMIT) rendered.delete(rendered.keys().next().value!);
    rendered.set(hash, audio);
  };

  /**
   * Renders the pieces no earlier render left (`fresh`: every piece again): those stored
   * already are found in one query; the rest are synthesized a batch of the same language,
   * voice and rate per engine run (RENDER_BATCH texts) and stored. A batch that fails is
   * tried a text at a time; what still fails is returned, so its prompts are not retried
   * every round.
   */
  async function renderPieces(rows: readonly Pending[], fresh: boolean): Promise<Set<string>> {
    const need = new Map<string, PromptRequest>();
    for (const row of rows) {
      for (const piece of row.pieces) {
        if ((!fresh && rendered.has(piece.requestHash)) || need.has(piece.requestHash)) continue;
        need.set(piece.requestHash, {
          text: piece.text,
          lang: row.lang,
          ...(row.voice !== null && { voice: row.voice }),
          ...(row.rate !== null && { rate: row.rate }),
          piece: true,
        });
      }
    }
    const failed = new Set<string>();
    if (need.size === 0) return failed;
    if (!fresh) {
      for (const [hash, audio] of await deps.store.findAny([...need.keys()])) {
        remember(hash, audio);
        need.delete(hash);
      }
    }
    // texts said in one engine run share its options
    const groups = new Map<string, Array<[string, PromptRequest]>>();
    for (const entry of need) {
      const r = entry[1];
      const key = `${r.lang}\0${r.voice ?? ''}\0${r.rate ?? ''}`;
      groups.set(key, [...(groups.get(key) ?? []), entry]);
    }
    const now = deps.clock.now();
    for (const group of groups.values()) {
      for (let i = 0; i < group.length; i += RENDER_BATCH) {
        const batch = group.slice(i, i + RENDER_BATCH);
        const audio = await encodeOrEach(batch.map(([, r]) => r));
        const ok = batch.flatMap(([hash], n) => {
          const a = audio[n];
          if (!a) failed.add(hash);
          return a ? [{ hash, a }] : [];
        });
        await deps.store.saveAudio(
          ok.map(({ a }) => ({ ...a, publicId: deps.prompts.publicIdOf(a.contentHash) })),
          now,
        );
        for (const { hash, a } of ok) {
          remember(hash, { contentHash: a.contentHash, durationMs: a.durationMs });
        }
      }
    }
    return failed;
  }

  /** A batch in one run; if that fails, each alone (undefined where one fails too). */
  async function encodeOrEach(requests: PromptRequest[]) {
    try {
      return await deps.prompts.encodeMany(requests);
    } catch {
      return Promise.all(
        requests.map((r) =>
          deps.prompts.encodeMany([r]).then(
            ([a]) => a,
            () => undefined,
          ),
        ),
      );
    }
  }

  /** Renders each row's pieces (reusing what is stored) and records their parts. */
  async function renderRows(rows: readonly Pending[], fresh = false): Promise<void> {
    if (rows.length === 0) return;
    const failed = await renderPieces(rows, fresh);
    const done: Array<{ id: number; parts: string[] | null; duration_ms: number | null }> = [];
    const uses = new Map<
      string,
      { requestHash: string; callId: string | null; contentHash: string }
    >();
    for (const row of rows) {
      const parts: string[] = [];
      let durationMs = 0;
      for (const piece of row.pieces) {
        const audio = failed.has(piece.requestHash) ? undefined : rendered.get(piece.requestHash);
        if (!audio) break;
        // a piece with someone's details is that call's; the flow's own words are shared
        const callId = piece.personal && row.callId !== null ? row.callId : null;
        if (callId !== null || !sharedUses.has(piece.requestHash)) {
          uses.set(`${piece.requestHash} ${callId}`, {
            requestHash: piece.requestHash,
            callId,
            contentHash: audio.contentHash,
          });
        }
        parts.push(audio.contentHash);
        durationMs += audio.durationMs;
      }
      // a prompt a piece of which cannot be rendered is done with, without parts: GET tries
      // once more, and answers with the reason
      const complete = parts.length === row.pieces.length;
      done.push({
        id: row.id,
        parts: complete ? parts : null,
        duration_ms: complete ? durationMs : null,
      });
    }
    await deps.store.addUses([...uses.values()], deps.clock.now());
    for (const u of uses.values()) if (u.callId === null) sharedUses.add(u.requestHash);
    await deps.db.execute(sql`
      update prompt_compositions c
      set parts = v.parts, duration_ms = v.duration_ms, rendered_at = ${deps.clock.now().toISOString()}::timestamptz
      from jsonb_to_recordset(${JSON.stringify(done)}::jsonb) as v(id bigint, parts jsonb, duration_ms integer)
      where c.id = v.id`);
  }

  const pendingColumns = {
    id: promptCompositions.id,
    callId: promptCompositions.callId,
    lang: promptCompositions.lang,
    voice: promptCompositions.voice,
    rate: promptCompositions.rate,
    pieces: promptCompositions.pieces,
  };

  return {
    plan,

    rowsFor(plans, callId, now) {
      const seen = new Set<string>();
      const rows: CompositionRow[] = [];
      for (const p of plans) {
        if (seen.has(p.compositionHash)) continue;
        seen.add(p.compositionHash);
        rows.push(rowOf(p, p.personal ? callId : null, now));
      }
      return rows;
    },

    async prepareFlow(compiled) {
      const plans = new Map<string, PlannedPrompt>();
      for (const node of compiled.nodes) {
        for (const [lang, intro] of Object.entries(node.intro)) {
          if (typeof intro === 'string' || intro.say.includes('{{')) continue;
          const p = plan(intro, lang, {});
          plans.set(p.compositionHash, p);
        }
      }
      if (plans.size === 0) return;
      const now = deps.clock.now();
      await storeCompositions(
        deps.db,
        [...plans.values()].map((p) => rowOf(p, null, now)),
      );
      await this.renderPending();
    },

    async renderPending() {
      while (pending) await pending.catch(() => {});
      pending = (async () => {
        const rows = (await deps.db
          .select(pendingColumns)
          .from(promptCompositions)
          .where(isNull(promptCompositions.renderedAt))
          .orderBy(promptCompositions.id)
          .limit(PENDING_BATCH)) as Pending[];
        await renderRows(rows);
        return rows.length;
      })();
      try {
        return await pending;
      } finally {
        pending = undefined;
      }
    },

    async preview(prompt, lang, vars) {
      const planned = plan(prompt, lang, vars);
      const bodies: Uint8Array[] = [];
      for (const piece of planned.pieces) {
        const request = {
          text: piece.text,
          lang,
          ...(prompt.voice !== undefined && { voice: prompt.voice }),
          ...(prompt.rate !== undefined && { rate: prompt.rate }),
          piece: true,
        };
        if (piece.personal) {
          bodies.push((await deps.prompts.encode(request)).body);
          continue;
        }
        const shared = await deps.prompts.render(request, {});
        const [body] = (await deps.store.bodies([shared.contentHash])) ?? [];
        bodies.push(body ?? (await deps.prompts.encode(request)).body);
      }
      return { body: joinAudio(deps.format, bodies), contentType, ext };
    },

    async read(publicId, wantedExt) {
      const find = () =>
        deps.db
          .select({
            ...pendingColumns,
            compositionHash: promptCompositions.compositionHash,
            ext: promptCompositions.ext,
            contentType: promptCompositions.contentType,
            parts: promptCompositions.parts,
          })
          .from(promptCompositions)
          .where(eq(promptCompositions.publicId, publicId))
          .limit(1);
      let [row] = await find();
      if (!row || row.ext !== wantedExt) return undefined;
      let bodies = row.parts ? await deps.store.bodies(row.parts as string[]) : undefined;
      if (!bodies) {
        // not rendered yet, or a piece went since: render it now
        await renderRows([row as Pending], true);
        [row] = await find();
        bodies = row?.parts ? await deps.store.bodies(row.parts as string[]) : undefined;
        if (!row || !bodies) return undefined;
      }
      return {
        body: joinAudio(row.ext === 'mp3' ? 'mp3' : 'wav8k', bodies),
        contentType: row.contentType,
        ext: row.ext,
        etag: row.compositionHash,
        shared: row.callId === null,
      };
    },
  };
}

/** Inserts a call's prompt rows in its start transaction (conflicts: already stored). */
export async function storeCompositions(tx: Queryable, rows: readonly CompositionRow[]) {
  for (let i = 0; i < rows.length; i += 500) {
    await tx
      .insert(promptCompositions)
      .values(rows.slice(i, i + 500))
      .onConflictDoNothing();
  }
}

/**
 * The speech side of a server: the engine SPEECH_ENGINE names, the prompt service and the
 * spoken prompts of flows, over one store and one id secret.
 */
export function createSpeech(options: {
  db: Db;
  config: Config;
  store: PromptStore;
  secret: string;
  clock: Clock;
  engine?: SpeechEngine;
}) {
  const { speech, publicUrl } = options.config;
  const engine = options.engine ?? speechEngineFor(speech);
  const common = {
    store: options.store,
    secret: options.secret,
    format: speech.format,
    publicUrl: publicUrl.replace(/\/+$/, ''),
    clock: options.clock,
  };
  const prompts = createPromptService({ ...common, engine });
  const spoken = createSpokenPrompts({ ...common, db: options.db, prompts, engine });
  return { engine, prompts, spoken };
}

/**
 * What the engine can say, for the flow checks (src/flows/checks.ts): undefined when the
 * engine cannot tell (it did not start), so flows load unchecked against it rather than not
 * at all; their prompts then fail when rendered, each with its reason.
 */
export async function speechCapabilities(
  engine: SpeechEngine,
): Promise<SpeechCapabilities | undefined> {
  try {
    const voices = await engine.voices();
    return {
      engine: engine.name,
      maxTextLength: engine.maxTextLength,
      languages: voices.map((v) => v.lang),
    };
  } catch {
    return undefined;
  }
}
