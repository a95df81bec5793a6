/**
 * Calling windows and the frequency cap for plain sends, when a request asks for them
 * (`window`, `cap` on POST /v1/calls, /v1/calls/batch and /v1/messages): the same rules a
 * campaign follows (docs/campaigns.md), decided per recipient inside the request's
 * transaction.
 *
 * - `window`: `true` for the project's CALLING_WINDOW, or `{ from, to, days? }`. A recipient
 *   outside it is stored now and sent when its window opens (its outbox row waits); one for
 *   whom no time fits within two weeks is refused (`OUTSIDE_WINDOW`).
 * - `cap: true`: at most CONTACT_CAP_PER_DAY sends per number per local day (campaign calls
 *   count too), taken with the campaigns' one atomic statement; over it is refused
 *   (`OVER_CAP`).
 */
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import { rowsOf, type Tx } from '../db/client.ts';
import type { ErrorDetail } from '../errors.ts';
import {
  type CallingWindow,
  CallingWindowSchema,
  type HolidayCalendar,
  nextAllowed,
} from './windows.ts';
import { countryOf, zonesOf } from './zones.ts';

/** What a request may ask for. */
export const SendLimitsInput = {
  window: z
    .union([z.literal(true), CallingWindowSchema])
    .optional()
    .meta({
      description:
        "Send only inside this calling window in the recipient's time zones (`true`: CALLING_WINDOW); outside it, the send waits for it (docs/campaigns.md).",
    }),
  cap: z.boolean().optional().meta({
    description:
      'Count this send against CONTACT_CAP_PER_DAY (per number and local day, campaigns included); over it, refused with OVER_CAP.',
  }),
};

/** The project's settings the limits use (from the config). */
export interface LimitSettings {
  window: CallingWindow;
  holidays: HolidayCalendar;
  capPerDay: number | undefined;
}

export type LimitDecision =
  | { ok: true; availableAt: Date | null }
  | { ok: false; code: 'OUTSIDE_WINDOW' | 'OVER_CAP'; message: string; details: ErrorDetail[] };

/** The local date (YYYY-MM-DD) of an instant in the number's first zone (UTC without one). */
export function localDateOf(at: Date, zones: readonly string[]): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone: zones[0] ?? 'UTC' }).format(at);
}

/**
 * Decides each recipient (`path` names its `to` in messages): when it may be sent, or why it
 * may not. The cap is taken here, in `tx`: call it where the sends are stored.
 */
export async function decideLimits(
  tx: Tx,
  settings: LimitSettings,
  asked: { window?: true | CallingWindow | undefined; cap?: boolean | undefined },
  recipients: ReadonlyArray<{ to: string; path: string }>,
  now: Date,
): Promise<LimitDecision[]> {
  const window = asked.window === true ? settings.window : asked.window;
  const decisions: LimitDecision[] = [];
  const wanted: Array<{ index: number; phone: string; day: string }> = [];
  for (const [index, r] of recipients.entries()) {
    const zones = await zonesOf(r.to);
    let availableAt: Date | null = null;
    if (window) {
      const at = nextAllowed(now, zones, window, settings.holidays, countryOf(r.to));
      if (at === null) {
        decisions.push({
          ok: false,
          code: 'OUTSIDE_WINDOW',
          message: `${r.path}: no time in the next two weeks is inside the window ${window.from}-${window.to} in all of the number's time zones (${zones.join(', ') || 'UTC'})`,
          details: [{ path: r.path, code: 'OUTSIDE_WINDOW', message: 'no time fits the window' }],
        });
        continue;
      }
      if (at.getTime() > now.getTime()) availableAt = at;
    }
    decisions.push({ ok: true, availableAt });
    if (asked.cap) wanted.push({ index, phone: r.to, day: localDateOf(availableAt ?? now, zones) });
  }
  if (asked.cap && settings.capPerDay !== undefined && wanted.length > 0) {
    const taken = await takeContacts(tx, wanted, settings.capPerDay);
    for (const [n, w] of wanted.entries()) {
      if (taken[n]) continue;
      const path = recipients[w.index]!.path;
      decisions[w.index] = {
        ok: false,
        code: 'OVER_CAP',
        message: `${path}: ${w.phone} has had ${settings.capPerDay} contact(s) on ${w.day}, the most CONTACT_CAP_PER_DAY allows`,
        details: [{ path, code: 'OVER_CAP', message: `over ${settings.capPerDay} a day` }],
      };
    }
  }
  return decisions;
}

/**
 * Takes one contact per entry while its (number, day) is under `cap`: one upsert that counts
 * only below it, so instances and campaigns racing for the same number cannot pass it
 * together. A number listed twice takes two, in a second statement (a statement may not
 * touch a row twice). Answers, per entry in order, whether it got its contact.
 */
export async function takeContacts(
  tx: Tx,
  wanted: ReadonlyArray<{ phone: string; day: string }>,
  cap: number,
): Promise<boolean[]> {
  const got = new Array<boolean>(wanted.length).fill(false);
  // rounds: each (number, day) at most once per statement
  let left = wanted.map((w, index) => ({ ...w, index }));
  while (left.length > 0) {
    const round = new Map<string, (typeof left)[number]>();
    const later: typeof left = [];
    for (const w of left) {
      const key = `${w.phone} ${w.day}`;
      if (round.has(key)) later.push(w);
      else round.set(key, w);
    }
    const rows = [...round.values()].map(({ phone, day }) => ({ phone, day }));
    const taken = rowsOf<{ phone: string; day: string }>(
      await tx.execute(sql`
        insert into contact_counts (phone, day, count)
        select v.phone, v.day, 1 from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
          as v(phone text, day date)
        on conflict (phone, day) do update set count = contact_counts.count + 1
          where contact_counts.count < ${cap}
        returning phone, day::text as day`),
    );
    const ok = new Set(taken.map((t) => `${t.phone} ${String(t.day).slice(0, 10)}`));
    for (const [key, w] of round) got[w.index] = ok.has(key);
    left = later;
  }
  return got;
}

/** Holds stored messages' outbox rows until their window opens (in the storing transaction). */
export async function delayOutbox(
  tx: Tx,
  delays: ReadonlyArray<{ messageId: string; availableAt: Date }>,
): Promise<void> {
  if (delays.length === 0) return;
  const rows = delays.map((d) => ({ id: d.messageId, at: d.availableAt.toISOString() }));
  await tx.execute(sql`
    update outbox o set available_at = v.at
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as v(id uuid, at timestamptz)
    where o.message_id = v.id`);
}
