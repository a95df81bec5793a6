/**
 * GET /prompts/{id}.{ext}: what the provider fetches. Public (no token, even with API_TOKEN
 * set), with the audio's type, length, ETag and cache headers; 304 on a matching
 * If-None-Match; HEAD; 404 in the error envelope for an unknown id, a wrong extension, or a
 * name that is not an id, which never reaches the store.
 */
import { beforeAll, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { createEspeakEngine } from '../../src/speech/espeak.ts';
import { createPromptService, type RenderedPrompt } from '../../src/speech/prompts.ts';
import { createPromptStore, type PromptStore } from '../../src/speech/store.ts';
import { buildTestApp, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const clock: Clock = { now: () => new Date('2026-03-02T09:00:00.000Z') };
const SECRET = 'a-test-secret-that-is-long-enough-for-hmac';
const ENV = { API_TOKEN: 'the-api-token' };

describeEachEngine('GET /prompts/{id}.{ext}', (ctx) => {
  const app = () => buildTestApp(ctx.database(), { env: ENV }).app;
  let shared: RenderedPrompt;
  let personal: RenderedPrompt;

  beforeAll(async () => {
    const prompts = createPromptService({
      engine: createEspeakEngine(),
      store: createPromptStore(ctx.database().db),
      secret: SECRET,
      format: 'mp3',
      publicUrl: 'http://localhost:3000',
      clock,
    });
    shared = await prompts.render({ text: 'Press 1 to confirm.', lang: 'en' });
    personal = await prompts.render(
      { text: 'Добрий день, Маріє.', lang: 'uk' },
      { callId: '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e01' },
    );
  });

  const path = (p: RenderedPrompt) => new URL(p.url).pathname;

  it('serves the audio with no token, its type, length, ETag and a long immutable cache', async () => {
    const res = await app().request(path(shared));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/mpeg');
    const body = new Uint8Array(await res.arrayBuffer());
    expect(res.headers.get('content-length')).toBe(String(body.byteLength));
    // an MPEG audio frame (or an ID3 tag) starts the file
    expect(body[0] === 0xff || String.fromCharCode(...body.subarray(0, 3)) === 'ID3').toBe(true);
    expect(res.headers.get('etag')).toMatch(/^"[0-9a-f]{64}"$/);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('keeps a personal prompt out of caches', async () => {
    const res = await app().request(path(personal));
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('private, no-store');
  });

  it('answers 304 to a matching If-None-Match, 200 to another', async () => {
    const first = await app().request(path(shared));
    const etag = first.headers.get('etag') ?? '';
    const again = await app().request(path(shared), { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    expect(again.headers.get('etag')).toBe(etag);
    expect((await again.arrayBuffer()).byteLength).toBe(0);
    const weak = await app().request(path(shared), {
      headers: { 'if-none-match': `"other", W/${etag}` },
    });
    expect(weak.status).toBe(304);
    const other = await app().request(path(shared), { headers: { 'if-none-match': '"other"' } });
    expect(other.status).toBe(200);
  });

  it('answers HEAD with the headers and no body', async () => {
    const get = await app().request(path(shared));
    const head = await app().request(path(shared), { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('audio/mpeg');
    expect(head.headers.get('content-length')).toBe(get.headers.get('content-length'));
    expect(head.headers.get('etag')).toBe(get.headers.get('etag'));
    expect((await head.arrayBuffer()).byteLength).toBe(0);
  });

  it('answers 404 in the envelope for an unknown id or the wrong extension', async () => {
    const unknown = `/prompts/${'A'.repeat(24)}.mp3`;
    const wrongExt = `/prompts/${shared.id}.wav`;
    for (const p of [unknown, wrongExt]) {
      const res = await app().request(p);
      expect(res.status, p).toBe(404);
      expect((await readJson(res)).error).toMatchObject({ code: 'NOT_FOUND' });
    }
  });

  it('never asks the store about a name that is not an id', async () => {
    const asked: string[] = [];
    const real = createPromptStore(ctx.database().db);
    const spy: PromptStore = {
      ...real,
      read: (id) => {
        asked.push(id);
        return real.read(id);
      },
    };
    const probe = buildTestApp(ctx.database(), { env: ENV, prompts: spy }).app;
    for (const p of [
      `/prompts/${shared.id}`,
      `/prompts/${shared.id.slice(1)}.mp3`,
      `/prompts/${shared.id}x.mp3`,
      `/prompts/${shared.id}.MP3`,
      `/prompts/..%2F..%2Fetc%2Fpasswd`,
      `/prompts/${"'; drop table x; --".padEnd(24, 'a')}.mp3`,
    ]) {
      const res = await probe.request(p);
      expect(res.status, p).toBe(404);
      expect((await readJson(res)).error.code, p).toBe('NOT_FOUND');
    }
    // a NUL in the path is refused before any route (http/input.ts)
    const nul = await probe.request(`/prompts/${'a'.repeat(24)}.mp3%00.wav`);
    expect(nul.status).toBe(400);
    expect((await readJson(nul)).error.code).toMatch(/^[A-Z_]+$/);
    expect(asked).toEqual([]);
    expect((await probe.request(path(shared))).status).toBe(200);
    expect(asked).toEqual([shared.id]);
  });
});
