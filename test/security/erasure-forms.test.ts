/**
 * Erasure finds a person in every form their number is written in: with or without `+`,
 * `00`, a national trunk `0`, spaces, dashes, dots, brackets, slashes, URL-encoded (`%2B`,
 * `%20`, `+` for a space in a form), as a JSON number; in delivery and Viber callbacks, JSON
 * and form-encoded. Numbers that only look alike (one digit more, the same tail under another
 * code) stay. The pattern is one (src/privacy/redact.ts), run by Postgres and by JavaScript:
 * both must agree, on PGlite and on real Postgres.
 */
import { sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { rowsOf } from '../../src/db/client.ts';
import {
  phoneForms,
  phoneMentionSql,
  phoneMentions,
  phonePattern,
  redactMentions,
} from '../../src/privacy/redact.ts';
import { buildTestApp, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

/** `+380501234567` written every way the issue lists, as text (JSON strings, free text). */
function writtenForms(p: string) {
  const d = p.slice(1); // 380501234567
  const n = `0${d.slice(3)}`; // 0501234567
  const [op, a, b, c] = [n.slice(0, 3), n.slice(3, 6), n.slice(6, 8), n.slice(8)];
  return {
    e164: p,
    'without +': d,
    '00': `00${d}`,
    'trunk 0': n,
    spaces: `${op} ${a} ${b} ${c}`,
    dashes: `${op}-${a}-${b}-${c}`,
    dots: `${op}.${a}.${b}.${c}`,
    brackets: `(${op}) ${a}-${b}-${c}`,
    slashes: `${op}/${a}/${b}${c}`,
    'country code with brackets': `+38 (${op}) ${a} ${b} ${c}`,
    'international, spaced': `+${d.slice(0, 3)} ${d.slice(3, 5)} ${a} ${b} ${c}`,
    '00, spaced': `00 ${d.slice(0, 3)} ${d.slice(3, 5)} ${a}${b}${c}`,
    'no-break spaces': `${op}\u00a0${a}\u00a0${b}\u00a0${c}`,
  };
}

/** The same, as form bodies carry them: URL escapes, and `+` for a space. */
function encodedForms(p: string): Record<string, string> {
  const d = p.slice(1);
  const n = `0${d.slice(3)}`;
  const [op, a, b, c] = [n.slice(0, 3), n.slice(3, 6), n.slice(6, 8), n.slice(8)];
  return {
    '%2B': `%2B${d}`,
    '%2b': `%2b${d}`,
    '%20': `${op}%20${a}%20${b}%20${c}`,
    '+ for space': `${op}+${a}+${b}+${c}`,
    'escaped brackets and slash': `%28${op}%29%20${a}%2F${b}${c}`,
    'after an escaped space': `call%20${n}`,
    'form-encoded +380': new URLSearchParams({ x: `+38 (${op}) ${a}-${b}-${c}` })
      .toString()
      .slice(2),
  };
}

/** Numbers of other people that share digits with `p`: none of them is `p`. */
function nearMisses(p: string): Record<string, string> {
  const d = p.slice(1);
  const nsn = d.slice(3); // 501234567
  const other = nsn.startsWith('67') ? '63' : '67';
  return {
    'one digit more at the end': `${p}8`,
    'one digit more in front': `1${d}`,
    'trunk form, one digit more': `0${nsn}8`,
    'inside a longer run': `99${d}99`,
    'same national digits, Poland': `+48${nsn}`,
    'same national digits, 00 and another code': `0048${nsn}`,
    'same tail, another operator': `+380${other}${nsn.slice(2)}`,
    'same tail, another operator, national': `0${other} ${nsn.slice(2, 5)} ${nsn.slice(5, 7)} ${nsn.slice(7)}`,
    'the last digit differs': `${p.slice(0, -1)}${(Number(p.at(-1)) + 1) % 10}`,
  };
}

describe('the forms of a number (redact.ts)', () => {
  const P = '+380501234567';

  it('are described from the numbering plan: a trunk 0 in Ukraine, 8 in Russia, none in the US', () => {
    expect(phoneForms(P)).toEqual({
      international: '380501234567',
      national: '0501234567',
      commonTail: '0501234567',
    });
    expect(phoneForms('+74951234567')).toMatchObject({ national: '84951234567' });
    expect(phoneForms('+12133734253')).toMatchObject({ national: '2133734253' });
    // Italy keeps its leading 0 in the international form too: one form, no trunk
    expect(phoneForms('+390612345678')).toMatchObject({ national: '0612345678' });
  });

  it('matches every form and none of the near misses, in JavaScript', () => {
    const mentions = phoneMentions(P);
    for (const [form, text] of Object.entries({ ...writtenForms(P), ...encodedForms(P) })) {
      expect(mentions(`{"to":"${text}"}`), form).toBe(true);
      expect(mentions(`text=hi&to=${text}&x=1`), form).toBe(true);
    }
    expect(mentions('{"to":380501234567}')).toBe(true);
    for (const [miss, text] of Object.entries(nearMisses(P))) {
      expect(mentions(`{"to":"${text}"}`), miss).toBe(false);
    }
    expect(phoneMentions('+74951234567')('звоните 8 (495) 123-45-67')).toBe(true);
    expect(phoneMentions('+12133734253')('call (213) 373-4253')).toBe(true);
  });

  it('cuts every form out, keeping what stands around it and JSON valid', () => {
    const cut = (body: string) => redactMentions(body, { phones: [P] });
    for (const [form, text] of Object.entries(writtenForms(P))) {
      expect(cut(`{"to":"${text}","n":1}`), form).toBe('{"to":"[erased]","n":1}');
      expect(cut(`call ${text}, please`), form).toBe('call [erased], please');
    }
    for (const [form, text] of Object.entries(encodedForms(P))) {
      const body = `a=1&to=${text}&b=2`;
      expect(cut(body), form).not.toMatch(/5.?0.?1.?2.?3.?4.?5.?6.?7/);
      expect(cut(body).startsWith('a=1&to='), form).toBe(true);
      expect(cut(body).endsWith('&b=2'), form).toBe(true);
    }
    // a JSON number becomes a string; the same digits inside a string stay a string's
    const mixed = cut('{"to":380501234567,"text":"or 380501234567","list":[380501234567]}');
    expect(JSON.parse(mixed)).toEqual({
      to: '[erased]',
      text: 'or [erased]',
      list: ['[erased]'],
    });
    // whatever number token holds it goes whole (a float, a negative one): still JSON
    expect(JSON.parse(cut('{"a":38050.1234567,"b":-380501234567e2,"c":1}'))).toEqual({
      a: '[erased]',
      b: '[erased]',
      c: 1,
    });
    // twice in a row, and next to others
    expect(cut('0501234567 0501234567,+48501234567')).toBe('[erased] [erased],+48501234567');
    for (const text of Object.values(nearMisses(P))) expect(cut(text)).toBe(text);
  });
});

describeEachEngine('erasure finds every form', (ctx) => {
  let app: App;
  const db = () => ctx.database().db;
  const P = phone();
  const Q = phone();
  const forms = writtenForms(P);
  const encoded = encodedForms(P);
  const misses = nearMisses(P);
  /** inbox rows by a unique marker each seeded body carries */
  const seeded = new Map<string, { marker: string; body: string; expected: string | null }>();

  const post = async (path: string, body: string, contentType: string) => {
    const res = await app.request(path, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body,
    });
    expect(res.status, body).toBe(200);
  };
  const bodyOf = async (marker: string) => {
    const found = rowsOf<{ body: string }>(
      await db().execute(sql`select body from inbox where position(${marker} in body) > 0`),
    );
    expect(found.length, marker).toBeLessThanOrEqual(1);
    return found[0]?.body ?? null;
  };
  let report: Record<string, number>;

  beforeAll(async () => {
    ({ app } = buildTestApp(ctx.database()));
    // delivery callbacks, JSON, one per form, about a message of someone else's (so the body
    // is kept, with the number cut out): the number as a string, and as a JSON number
    for (const [form, text] of Object.entries(forms)) {
      const marker = uniq('json');
      const body = JSON.stringify({ customerMessageId: marker, status: 'delivered', to: text });
      seeded.set(`delivery JSON: ${form}`, {
        marker,
        body,
        expected: body.replace(JSON.stringify(text), '"[erased]"'),
      });
      await post('/hooks/delivery', body, 'application/json');
    }
    {
      const marker = uniq('number');
      const body = `{"customerMessageId":"${marker}","status":"delivered","to":${P.slice(1)}}`;
      seeded.set('delivery JSON: a JSON number', {
        marker,
        body,
        expected: `{"customerMessageId":"${marker}","status":"delivered","to":"[erased]"}`,
      });
      await post('/hooks/delivery', body, 'application/json');
    }
    // delivery callbacks, form-encoded
    for (const [form, text] of Object.entries(encoded)) {
      const marker = uniq('form');
      const body = `cmid=${marker}&stat=DELIVRD&to=${text}`;
      const expected =
        form === 'after an escaped space'
          ? `cmid=${marker}&stat=DELIVRD&to=call%20[erased]`
          : `cmid=${marker}&stat=DELIVRD&to=[erased]`;
      seeded.set(`delivery form: ${form}`, { marker, body, expected });
      await post('/hooks/delivery', body, 'application/x-www-form-urlencoded');
    }
    // a callback that mentions the number and nothing else: deleted whole
    {
      const marker = uniq('plain');
      const body = `${marker}: call me on ${forms.brackets}`;
      seeded.set('plain text about the number alone', { marker, body, expected: null });
      await post('/hooks/delivery', body, 'text/plain');
    }
    // Viber: from the person (in several forms; deleted), and from someone else who writes the
    // person's number in the text (kept, cut out)
    for (const form of ['without +', 'trunk 0', 'spaces', 'e164'] as const) {
      const marker = uniq('viber');
      const body = JSON.stringify({ messageId: marker, from: forms[form], text: 'STOP' });
      seeded.set(`Viber from the person: ${form}`, { marker, body, expected: null });
      await post('/hooks/viber', body, 'application/json');
    }
    {
      const marker = uniq('viber-q');
      const body = JSON.stringify({
        messageId: marker,
        from: Q,
        text: `my friend is on ${forms.dashes}`,
        contact: Number(P.slice(1)),
      });
      seeded.set('Viber from someone else, mentioning the person', {
        marker,
        body,
        expected: body.replace(forms.dashes, '[erased]').replace(`:${P.slice(1)}`, ':"[erased]"'),
      });
      await post('/hooks/viber', body, 'application/json');
    }
    // near misses, JSON and form: kept as they are
    for (const [miss, text] of Object.entries(misses)) {
      const marker = uniq('miss');
      const body = JSON.stringify({ customerMessageId: marker, status: 'delivered', to: text });
      seeded.set(`near miss: ${miss}`, { marker, body, expected: body });
      await post('/hooks/delivery', body, 'application/json');
      const formMarker = uniq('miss-form');
      const form = `cmid=${formMarker}&stat=DELIVRD&to=${encodeURIComponent(text)}`;
      seeded.set(`near miss, form: ${miss}`, { marker: formMarker, body: form, expected: form });
      await post('/hooks/delivery', form, 'application/x-www-form-urlencoded');
    }
    for (const { marker } of seeded.values()) expect(await bodyOf(marker), marker).not.toBeNull();

    const res = await app.request(`/v1/subjects/${encodeURIComponent(P)}`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    report = (await readJson(res)).removed;
  });

  it('removes or cuts out every form, in delivery and Viber callbacks, JSON and forms', async () => {
    const wrong: string[] = [];
    for (const [what, { marker, expected }] of seeded) {
      const body = await bodyOf(marker);
      if (body !== expected) wrong.push(`${what}: ${body} (expected ${expected})`);
    }
    expect(wrong).toEqual([]);
  });

  it('counts them: bodies about the person alone deleted, the others kept and cut', () => {
    const viberFromP = 4;
    expect(report).toMatchObject({
      inboundMessages: viberFromP,
      inboundMessagesRedacted: 1,
      rawCallbacks: viberFromP + 1,
      rawCallbacksRedacted: Object.keys(forms).length + 1 + Object.keys(encoded).length + 1,
      sandbox: 0,
    });
  });

  it("removes the person's incoming messages in every form, and cuts them out of others'", async () => {
    const inbound = rowsOf<{ from: string; text: string; contact: string }>(
      await db().execute(
        sql`select "from", text, data->>'contact' as contact from inbound_messages`,
      ),
    );
    // in its data (the message as received) too, where the number was a JSON number
    expect(inbound).toEqual([{ from: Q, text: 'my friend is on [erased]', contact: '[erased]' }]);
  });

  it('agrees with JavaScript: the SQL test (prefilter and pattern) picks what the RegExp picks', async () => {
    const texts = [
      ...Object.values(forms),
      ...Object.values(encoded),
      ...Object.values(misses),
      `{"to":${P.slice(1)}}`,
      `x%2B${P.slice(1)}`,
    ];
    const mentions = phoneMentions(P);
    const found = rowsOf<{ t: string; hit: boolean; bare: boolean }>(
      await db().execute(
        sql`select t, ${phoneMentionSql(sql`t`, P)} as hit, t ~ ${phonePattern(P)} as bare
            from jsonb_array_elements_text(${JSON.stringify(texts)}::jsonb) as t`,
      ),
    );
    expect(found).toHaveLength(texts.length);
    for (const row of found) {
      expect({ text: row.t, sql: row.hit, pattern: row.bare }).toEqual({
        text: row.t,
        sql: mentions(row.t),
        pattern: mentions(row.t),
      });
    }
    expect(found.filter((r) => r.hit)).toHaveLength(
      Object.keys(forms).length + Object.keys(encoded).length + 2,
    );
  });

  it('documents the new counts', async () => {
    const doc = await readJson(await app.request('/openapi.json'));
    const counts = doc.components.schemas.RemovedCounts.properties;
    expect(counts.sandbox.description).toMatch(/sandbox/);
    expect(counts.inboundMessagesRedacted.description).toMatch(/others/);
  });
});
