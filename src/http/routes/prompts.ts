/**
 * GET (and HEAD) /prompts/{id}.{ext}: the rendered prompts, for the provider to fetch while it
 * plays a menu. Public, with no token (the provider sends none): what guards a prompt is its
 * id, an HMAC of the audio's hash (src/speech/ids.ts), which cannot be guessed or computed
 * from the words in it.
 *
 * The file name is checked against the id's pattern before any query, so nothing else ever
 * reaches the database or a path; an unknown id, or a known one with another extension,
 * answers 404 in the error envelope. A prompt's bytes never change (they are its content
 * hash, the ETag), so a shared prompt is cacheable for a year and marked immutable; a personal
 * one (rendered for a call, with someone's details) is `private, no-store`: no cache keeps it
 * past its removal.
 *
 * @example
 * curl -i http://localhost:3000/prompts/q9y1V0xk2b7M0aPqRs8tUv3w.wav
 * // 200, Content-Type: audio/wav, ETag: "<sha256>", Cache-Control: public, max-age=31536000, immutable
 */
import { z } from '@hono/zod-openapi';
import { isSpeechPublicId } from '../../speech/ids.ts';
import type { SpokenPrompts } from '../../speech/spoken.ts';
import type { PromptStore } from '../../speech/store.ts';
import { errorResponse } from '../errors.ts';
import { errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';

/** `{id}.{ext}`: a 24-character public id and a short lower-case extension. */
const FILE_NAME = /^([A-Za-z0-9_-]{24})\.([a-z0-9]{1,5})$/;

/** A year: the longest max-age caches honour; the bytes behind a URL never change. */
export const PROMPT_MAX_AGE_SECONDS = 31_536_000;

/** Whether an If-None-Match header names `etag` (a list, weak forms, or `*`). */
function matchesEtag(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header
    .split(',')
    .map((t) => t.trim().replace(/^W\//, ''))
    .some((t) => t === '*' || t === etag);
}

export function promptRoutes(deps: { store: PromptStore; spoken?: SpokenPrompts }) {
  const app = newRouter();
  app.get('/prompts/:file', async (c) => {
    const match = FILE_NAME.exec(c.req.param('file'));
    const id = match?.[1];
    const ext = match?.[2];
    if (id === undefined || ext === undefined || !isSpeechPublicId(id)) {
      return errorResponse(c, 'NOT_FOUND', 'no such prompt');
    }
    // a flow's `say:` prompt (its pieces joined), else one rendered file
    const spoken = await deps.spoken?.read(id, ext);
    const file = spoken ? { ...spoken, contentHash: spoken.etag } : await deps.store.read(id);
    if (!file || file.ext !== ext) return errorResponse(c, 'NOT_FOUND', 'no such prompt');
    const etag = `"${file.contentHash}"`;
    c.header('ETag', etag);
    c.header(
      'Cache-Control',
      file.shared ? `public, max-age=${PROMPT_MAX_AGE_SECONDS}, immutable` : 'private, no-store',
    );
    c.header('X-Content-Type-Options', 'nosniff');
    if (matchesEtag(c.req.header('if-none-match'), etag)) return c.body(null, 304);
    c.header('Content-Type', file.contentType);
    c.header('Content-Length', String(file.body.byteLength));
    return c.body(file.body as Uint8Array<ArrayBuffer>, 200);
  });
  const audio = { schema: z.string().meta({ format: 'binary' }) };
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/prompts/{file}',
    operationId: 'getPrompt',
    tags: ['prompts'],
    // the provider sends no token: the id, an HMAC, cannot be guessed (docs/speech.md)
    security: [],
    ...errorCodes({ never: ['VALIDATION_ERROR'] }),
    summary: 'A rendered prompt, for the provider to play (HEAD too)',
    description:
      "Audio Switchboard rendered from a flow's `say:` text (docs/speech.md), in SPEECH_FORMAT: WAV (16-bit PCM mono, 8 or 16 kHz) or MP3. The id is an HMAC of the audio's SHA-256, which is the ETag. A shared prompt is `public, max-age=31536000, immutable`; one with a person's details `private, no-store`, and gone a grace period after its call.",
    request: {
      params: z.object({
        file: z.string().meta({
          description: '{id}.{ext}: the 24-character id and wav or mp3',
          example: 'q9y1V0xk2b7M0aPqRs8tUv3w.wav',
        }),
      }),
      headers: z.object({ 'if-none-match': z.string().optional() }),
    },
    responses: {
      200: {
        description: 'the audio',
        headers: {
          ETag: { schema: { type: 'string' }, description: 'the SHA-256 of the file, quoted' },
          'Cache-Control': { schema: { type: 'string' } },
          'Content-Length': { schema: { type: 'integer' } },
        },
        content: { 'audio/wav': audio, 'audio/mpeg': audio },
      },
      304: { description: 'If-None-Match named its ETag: not modified' },
    },
  });
  return app;
}
