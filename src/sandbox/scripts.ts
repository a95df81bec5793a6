/**
 * Scripts say what the next message or call to a number does: its outcome and, for a speech
 * call, the keys the callee presses. Scripts for one number queue up and each is used once,
 * by the next message to that number (fallbacks included) at the moment it is sent. A script
 * with `keys` or `live` is a speech call's: a message of another type passes it by (an SMS
 * sent while a call is scripted does not use up the call's keys) and takes the first script
 * without them, if any.
 *
 * @example
 * const book = createScriptBook();
 * book.add(Script.parse({ to: '+380501234567', keys: ['1'], outcome: 'delivered' }));
 * book.take('+380501234567', 'sms'); // undefined: the script is for a call
 * book.take('+380501234567', 'speechcall'); // that script; the next take finds none
 */
import { z } from 'zod';
import { ScriptKey } from './speechcall.ts';

/** What happens to a message: delivered, read (Viber), failed, or expired. */
export const ScriptedOutcome = z.enum(['delivered', 'read', 'failed', 'expired']);
export type ScriptedOutcome = z.infer<typeof ScriptedOutcome>;

/** Writes a number the way scripts are matched: digits with a leading +. */
export function normalizeNumber(value: string): string {
  const compact = value.replace(/[\s().-]/g, '');
  return /^\d+$/.test(compact) ? `+${compact}` : compact;
}

export const Script = z.strictObject({
  to: z.string().min(1).transform(normalizeNumber),
  /** Speech calls: the callee's inputs, menu by menu; when they run out, silence (timeout). */
  keys: z.array(ScriptKey).max(1000).optional(),
  /**
   * Speech calls: the callee presses keys live, through `POST /_control/calls/{ref}/keys`,
   * after any `keys` given here; each menu waits for them until its idle timeout.
   */
  live: z.boolean().optional(),
  /** Default: delivered (and read, for Viber). */
  outcome: ScriptedOutcome.optional(),
  /** Shown in the failed or expired callback; a default text otherwise. */
  reason: z.string().max(500).optional(),
});
export type Script = z.infer<typeof Script>;
export type ScriptInput = z.input<typeof Script>;

export interface ScriptBook {
  add(script: Script): void;
  /** Removes and returns the first script queued for `to` that a message of `type` uses. */
  take(to: string, type: string): Script | undefined;
  list(): Script[];
  clear(to?: string): void;
  /** Removes the scripts `mentions` picks (by number or reason); returns how many. */
  forget(mentions: (script: Script) => boolean): number;
}

/** A script only a speech call uses: it says what the callee presses. */
function forCallOnly(script: Script): boolean {
  return script.keys !== undefined || script.live === true;
}

export function createScriptBook(): ScriptBook {
  const byNumber = new Map<string, Script[]>();
  return {
    add(script) {
      const queue = byNumber.get(script.to) ?? [];
      queue.push(script);
      byNumber.set(script.to, queue);
    },
    take(to, type) {
      // asked for every message sent; most runs script no number at all
      if (byNumber.size === 0) return undefined;
      const key = normalizeNumber(to);
      const queue = byNumber.get(key);
      if (!queue) return undefined;
      const at = type === 'speechcall' ? 0 : queue.findIndex((s) => !forCallOnly(s));
      if (at < 0) return undefined;
      const [script] = queue.splice(at, 1);
      if (queue.length === 0) byNumber.delete(key);
      return script;
    },
    list: () => [...byNumber.values()].flat(),
    clear(to) {
      if (to === undefined) byNumber.clear();
      else byNumber.delete(normalizeNumber(to));
    },
    forget(mentions) {
      let n = 0;
      for (const [key, queue] of [...byNumber]) {
        const kept = queue.filter((script) => !mentions(script));
        n += queue.length - kept.length;
        if (kept.length === 0) byNumber.delete(key);
        else byNumber.set(key, kept);
      }
      return n;
    },
  };
}
