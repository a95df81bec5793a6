/**
 * Scripts say what the next message or call to a number does: its outcome and, for a speech
 * call, the keys the callee presses. Scripts for one number queue up and each is used once,
 * by the next message to that number (fallbacks included) at the moment it is sent.
 *
 * @example
 * const book = createScriptBook();
 * book.add(Script.parse({ to: '+380501234567', keys: ['1'], outcome: 'delivered' }));
 * book.take('+380501234567'); // that script; the next take finds none
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
  /** Removes and returns the first script queued for `to`. */
  take(to: string): Script | undefined;
  list(): Script[];
  clear(to?: string): void;
  /** Removes the scripts `mentions` picks (by number or reason); returns how many. */
  forget(mentions: (script: Script) => boolean): number;
}

export function createScriptBook(): ScriptBook {
  const byNumber = new Map<string, Script[]>();
  return {
    add(script) {
      const queue = byNumber.get(script.to) ?? [];
      queue.push(script);
      byNumber.set(script.to, queue);
    },
    take(to) {
      // asked for every message sent; most runs script no number at all
      if (byNumber.size === 0) return undefined;
      const key = normalizeNumber(to);
      const queue = byNumber.get(key);
      const script = queue?.shift();
      if (queue?.length === 0) byNumber.delete(key);
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
