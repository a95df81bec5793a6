/**
 * A campaign's recipients uploaded as CSV (`Content-Type: text/csv`), streamed into the
 * campaign: settings from the query, cells read by their param's type, a bad line reported by
 * its line number while the good ones go, a number listed twice kept once, and a bad query
 * answered with the field it names.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, phone, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

describe('campaigns from CSV [pglite]', () => {
  let db: TestDatabase;
  let app: ReturnType<typeof buildTestApp>;

  beforeAll(async () => {
    db = await createTestDatabase('pglite');
    app = buildTestApp(db.database);
  }, 60_000);
  afterAll(async () => db?.drop());

  const upload = (query: string, csv: string | ReadableStream<Uint8Array>) =>
    app.app.request(`/v1/campaigns?${query}`, {
      method: 'POST',
      headers: { 'content-type': 'text/csv' },
      body: csv,
      // a stream body needs half-duplex
      ...(typeof csv === 'string' ? {} : { duplex: 'half' }),
    } as RequestInit);

  it('stores the good rows and reports the bad ones by line', async () => {
    const [a, b] = [phone(), phone()];
    const csv = [
      'to,vars.name,date,lang',
      `${a},Maria,the third of March,uk`,
      'not a number,Bo,Monday,',
      `${b},"Taras, Jr.",Tuesday,`,
      `${a},Maria again,Friday,`,
      `${phone()},Olha,,`,
      `${phone()},"broken,Monday`,
      `${phone()},Petro,Sunday,`,
    ].join('\n');
    const res = await upload(
      'flow=appointment-reminder&from=Clinic&perMinute=30&window=09:00-20:00%20mon-fri&retryOn=failed,no-input&retryAfter=2h&maxAttempts=3',
      csv,
    );
    expect(res.status).toBe(201);
    const body = await readJson(res);
    expect(body.accepted).toBe(2);
    expect(body.duplicates).toBe(1);
    expect(body.rejectedCount).toBe(3);
    const byLine = Object.fromEntries(
      body.rejected.map((r: { row: number; code: string }) => [r.row, r.code]),
    );
    expect(byLine[3]).toBe('INVALID_RECIPIENT');
    expect(byLine[6]).toBe('INVALID_VARS'); // no date
    // a quote left open runs to the end of the file: the rest is one bad record, skipped
    expect(byLine[8]).toBe('VALIDATION_ERROR');
    expect(body.rejected.find((r: { row: number }) => r.row === 8).details[0].code).toBe(
      'INVALID_CSV',
    );
    expect(body.perMinute).toBe(30);
    expect(body.window).toEqual({
      from: '09:00',
      to: '20:00',
      days: ['mon', 'tue', 'wed', 'thu', 'fri'],
    });
    expect(body.retry).toEqual({ on: ['failed', 'no-input'], after: '2h', maxAttempts: 3 });
    const results = await readJson(await app.app.request(`/v1/campaigns/${body.id}/results`));
    expect(results.items.map((r: { line: number; to: string }) => [r.line, r.to])).toEqual([
      [2, a],
      [4, b],
    ]);
  });

  it('streams a large file in without holding it', async () => {
    const rows = 5000;
    let sent = 0;
    const encoder = new TextEncoder();
    // the body arrives a few hundred rows at a time, as an upload does
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(encoder.encode('to,name,date\n'));
        if (sent >= rows) return controller.close();
        let chunk = '';
        for (let i = 0; i < 250 && sent < rows; i++, sent++) {
          chunk += `+38050${String(1_000_000 + sent).padStart(7, '0')},Name ${sent},Monday\n`;
        }
        controller.enqueue(encoder.encode(chunk));
      },
    });
    const res = await upload('flow=appointment-reminder&from=Clinic', stream);
    expect(res.status).toBe(201);
    const body = await readJson(res);
    expect(body.accepted).toBe(rows);
    expect(body.recipients).toBe(rows);
    expect(body.progress.byState).toEqual({ pending: rows });
  });

  it('answers a bad query by the field it names, before reading the body', async () => {
    const missing = await upload('from=Clinic', 'to\n+380501234567\n');
    expect(missing.status).toBe(400);
    expect((await readJson(missing)).error.details[0].path).toBe('query.flow');
    const window = await upload(
      'flow=appointment-reminder&from=Clinic&window=20:00-09:00',
      'to\n+380501234567\n',
    );
    expect(window.status).toBe(400);
    expect((await readJson(window)).error.details[0].path).toBe('query.window');
    const unknown = await upload('flow=nope&from=Clinic', 'to\n+380501234567\n');
    expect(unknown.status).toBe(400);
    expect((await readJson(unknown)).error.code).toBe('UNKNOWN_FLOW');
  });
});
