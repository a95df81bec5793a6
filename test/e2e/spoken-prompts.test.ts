/**
 * `say:` prompts end to end over real HTTP, on the real engine (eSpeak NG): a flow speaks a
 * prompt without params (rendered when the flow loads, shared) and one with the caller's
 * name (rendered just before the call is dispatched, the call's own). The sandbox fetches
 * every intro as the provider would and finds audio; the files are WAV speech; the call's
 * own prompt is private and goes with the person's data on erasure.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../../src/db/client.ts';
import type { RunningServer } from '../../src/server.ts';
import { decodeWav, SILENCE_THRESHOLD } from '../../src/speech/audio.ts';
import { ESPEAK_IDLE_MS, espeakWorkerRunning } from '../../src/speech/espeak.ts';
import { phone, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const FLOW = `
params:
  name: string
  when: string
languages: [en, uk]
menus:
  main:
    intro:
      say:
        en: "Hello {{name}}, your appointment is {{when}}. Press 1 to confirm."
        uk: "Добрий день, {{name}}. Ваш запис {{when}}. Натисніть 1, щоб підтвердити."
    reprompt: { say: { en: "Sorry, I did not get that.", uk: "Вибачте, я не почув." }, rate: 0.9 }
    retries: 1
    timeout: 5s
    keys:
      "1": [ { outcome: confirmed }, hangup ]
      "2": [ { goto: recorded } ]
    wrong: [ { outcome: no-answer }, hangup ]
  recorded:
    intro: ivr_651854
    keys:
      "1": [ { outcome: confirmed }, hangup ]
    wrong: [ { outcome: no-answer }, hangup ]
`;

/** Speech, not silence: a share of loud samples, its length in ms. */
function heard(body: Uint8Array) {
  const { samples, sampleRate } = decodeWav(body);
  const loud = samples.filter((s) => Math.abs(s) > SILENCE_THRESHOLD * 10).length;
  return { ms: (samples.length / sampleRate) * 1000, loudShare: loud / samples.length, sampleRate };
}

describe('say: prompts through the sandbox (pglite)', () => {
  let db: TestDatabase;
  let server: RunningServer;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sb-say-'));
    writeFileSync(join(dir, 'reminder.yaml'), FLOW);
    db = await createTestDatabase('pglite');
    server = await startTestServer(db.database, { env: { FLOWS_DIR: dir } });
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("lets the engine's thread go once the flows' start-up prompts are rendered", async () => {
    // the thread would otherwise stay ESPEAK_IDLE_MS after its last render; 8 s bounds the
    // start-up renders on a loaded machine and stays under that timeout
    expect(ESPEAK_IDLE_MS).toBeGreaterThan(8_000);
    await eventually(async () => !espeakWorkerRunning(), 8_000, "the engine's thread to end");
    // and what it rendered is there: the reprompt has no params, so it rendered at start
    const stored = await db.database.db.execute(sql`select count(*)::int as n from prompt_audio`);
    expect(rowsOf<{ n: number }>(stored)[0]!.n).toBeGreaterThan(0);
  });

  it('plays the caller its own prompt, rendered before dispatch, and erases it with the person', async () => {
    const to = phone();
    await fetch(`${server.url}/sandbox/_control/scripts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ to, keys: ['timeout', '1'] }),
    });
    const res = await fetch(`${server.url}/v1/calls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        flow: 'reminder',
        to,
        from: 'Acme',
        vars: { name: 'Maria', when: 'on Monday at ten' },
      }),
    });
    expect(res.status).toBe(202);
    const { id } = await readJson(res);
    const call = await eventually(
      async () => {
        const c = await readJson(await fetch(`${server.url}/v1/calls/${id}`));
        return c.state === 'ended' && c;
      },
      30_000,
      'the call to end',
    );
    expect(call.outcome).toBe('confirmed');

    // what the provider got and fetched, as it would, at each distinct intro of the menu:
    // our /prompts/ URLs for the spoken menus (audio, every one), the audio id as written
    const [sent] = server.sandbox!.messages.list({ to, type: 'speechcall' });
    const checks = sent!.call!.audio!;
    const spoken = checks.filter((c) => c.url.includes('/prompts/')).map((c) => c.url);
    expect(spoken).toHaveLength(2); // the intro, and the reprompt its retry plays
    for (const c of checks.filter((c) => c.url.includes('/prompts/'))) {
      expect(c.result).toBe('audio');
    }
    expect(checks.find((c) => c.url === 'ivr_651854')?.result).toBe('provider-id');

    // the call's own prompt: private, WAV speech, longer than the shared reprompt
    const own = await fetch(spoken[0]!);
    expect(own.status).toBe(200);
    expect(own.headers.get('content-type')).toBe('audio/wav');
    expect(own.headers.get('cache-control')).toBe('private, no-store');
    const ownBody = new Uint8Array(await own.arrayBuffer());
    expect(Number(own.headers.get('content-length'))).toBe(ownBody.byteLength);
    const reprompt = await fetch(spoken.find((u) => u !== spoken[0])!);
    expect(reprompt.headers.get('cache-control')).toContain('immutable');
    const a = heard(ownBody);
    const b = heard(new Uint8Array(await reprompt.arrayBuffer()));
    expect(a.sampleRate).toBe(8000);
    expect(a.loudShare).toBeGreaterThan(0.3);
    expect(b.loudShare).toBeGreaterThan(0.3);
    expect(a.ms).toBeGreaterThan(b.ms);
    const etag = own.headers.get('etag')!;
    const again = await fetch(spoken[0]!, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);

    // erasure takes the person's prompt; the flow's shared words stay
    const erased = await fetch(`${server.url}/v1/subjects/${encodeURIComponent(to)}`, {
      method: 'DELETE',
    });
    expect(erased.status).toBe(200);
    expect((await readJson(erased)).removed.prompts).toBeGreaterThanOrEqual(2);
    expect((await fetch(spoken[0]!)).status).toBe(404);
    expect((await fetch(spoken.find((u) => u !== spoken[0])!)).status).toBe(200);
  }, 60_000);
});
