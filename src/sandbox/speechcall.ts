/**
 * What a speech call does with its `menu` (docs/provider.md, "Message types"), worked out in
 * advance from the menu and the callee's scripted keys: a pure plan of timed events that the
 * sandbox then plays on its clock (posting each webhook when its time comes).
 *
 * Rules:
 * - the call starts in menu 0;
 * - each menu takes the next scripted input: a key (`0`-`9`, `*`, `#`), `timeout` (no key
 *   within the idle timeout) or `hangup` (the callee hangs up, nothing more runs);
 * - when the scripted inputs run out, the callee stays silent: a timeout;
 * - a defined key runs its actions in order: `webhook` posts; `gotoMenu` names the menu the
 *   call continues in once the list is done (the condensed interface says only a hangup stops
 *   the processing of a list, so actions after a gotoMenu still run, and a later gotoMenu
 *   wins); `hangup` ends the call and nothing after it runs;
 * - an undefined key, or a timeout, runs `wrong`; with no `wrong`, the call hangs up;
 * - a list that ends with neither gotoMenu nor hangup ends the call (neither the docs nor the
 *   condensed interface say; there is nothing left to play);
 * - a call stops after `maxMenuVisits` menus, as a real call has a longest duration.
 *
 * A live call (a script with `live: true`) takes its keys as they are pressed, through
 * `POST /_control/calls/{ref}/keys`, and steps through each menu with the same `stepMenu`;
 * there a menu waits its whole idle timeout (not capped by `maxIdleTimeoutMs`), as a person
 * is at the keypad.
 *
 * @example
 * planCall([{ introUrl: 'x', dtmfActions: { d1: [{ action: 'hangup' }] } }], ['1'], DEFAULT_CALL_TIMINGS)
 * // events: menu 0 at 0, input '1' (d1) at 500, hangup at 500
 */
import { z } from 'zod';
import { type DtmfKey, menuIndex, type SpeechMenu } from '../provider/menu.ts';

/** A scripted callee input. `d1` spellings are accepted and mean `1`. */
export const ScriptKey = z
  .string()
  .transform((s) => s.trim().replace(/^d(?=[0-9*#]$)/, ''))
  .pipe(
    z.enum(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '#', 'timeout', 'hangup'], {
      error: 'a key is one of 0-9, *, #, timeout, hangup',
    }),
  );
export type ScriptKey = z.infer<typeof ScriptKey>;

export const CallTimings = z.object({
  /** How long after a menu starts the callee presses a scripted key. */
  keyPressMs: z.number().int().nonnegative().default(500),
  /**
   * A menu's wait for a key when it sets no idleTimeoutMsec (the condensed interface shows no
   * default).
   */
  defaultIdleTimeoutMs: z.number().int().positive().default(5000),
  /**
   * The longest the sandbox waits for a timeout, whatever idleTimeoutMsec says, so that a
   * sandbox call ends in seconds; raise it for faithful timing.
   */
  maxIdleTimeoutMs: z.number().int().positive().default(2000),
  /** Menus played before the sandbox hangs up a call that loops. */
  maxMenuVisits: z.number().int().positive().default(50),
});
export type CallTimings = z.infer<typeof CallTimings>;
export const DEFAULT_CALL_TIMINGS: CallTimings = CallTimings.parse({});

export type CallEndReason =
  | 'hangup-action'
  | 'no-wrong'
  | 'callee-hangup'
  | 'actions-ended'
  | 'max-visits';

/** One step of a call, `at` ms after the callee answered. */
export type CallEvent =
  | { at: number; type: 'menu'; menu: number; visit: number }
  | {
      at: number;
      type: 'input';
      menu: number;
      input: ScriptKey;
      /** The dtmfActions key that runs, or null when none does (the call hangs up). */
      runs: DtmfKey | null;
    }
  | {
      at: number;
      type: 'webhook';
      menu: number;
      key: DtmfKey;
      index: number;
      url: string;
      body: Record<string, unknown>;
      headers: Record<string, string>;
    }
  | { at: number; type: 'goto'; menu: number; key: DtmfKey; index: number; to: number }
  | { at: number; type: 'hangup'; reason: CallEndReason };

/** A scripted speech call from its answer on: what happens when, and how it ends. */
export interface SpeechCallPlan {
  events: CallEvent[];
  endReason: CallEndReason;
  /** ms after the answer at which the call ends. */
  durationMs: number;
}

/** What one input does in one menu: the events it causes, and where the call goes next. */
export type MenuStep =
  | { events: CallEvent[]; next: number }
  | { events: CallEvent[]; end: CallEndReason };

/**
 * Runs one input (given at `at`) in menu `current`: the input event, then the key's webhooks
 * and gotos; either the menu the call continues in or why it ends (the hangup event itself is
 * left to the caller). The scripted plan and a live call (keys pressed while it plays) both
 * step through a menu with this, so they cannot disagree.
 *
 * @example
 * stepMenu(menu, 0, '1', 500) // { events: [{ type: 'input', ... }], end: 'hangup-action' }
 */
export function stepMenu(
  menu: SpeechMenu,
  current: number,
  input: ScriptKey,
  at: number,
): MenuStep {
  const events: CallEvent[] = [];
  const item = menu[current];
  if (item === undefined) return { events, end: 'actions-ended' }; // unreachable for a validated menu
  if (input === 'hangup') {
    events.push({ at, type: 'input', menu: current, input, runs: null });
    return { events, end: 'callee-hangup' };
  }
  const pressed = input === 'timeout' ? undefined : (`d${input}` as DtmfKey);
  const runs: DtmfKey | null =
    pressed !== undefined && item.dtmfActions[pressed] !== undefined
      ? pressed
      : item.dtmfActions.wrong !== undefined
        ? 'wrong'
        : null;
  events.push({ at, type: 'input', menu: current, input, runs });
  if (runs === null) return { events, end: 'no-wrong' };

  let next: number | undefined;
  const actions = item.dtmfActions[runs] ?? [];
  for (const [index, action] of actions.entries()) {
    if (action.action === 'hangup') return { events, end: 'hangup-action' };
    if (action.action === 'gotoMenu') {
      next = menuIndex(action.menu);
      events.push({ at, type: 'goto', menu: current, key: runs, index, to: next });
      continue;
    }
    events.push({
      at,
      type: 'webhook',
      menu: current,
      key: runs,
      index,
      url: action.url,
      body: action.body ?? {},
      headers: action.headers ?? {},
    });
  }
  return next === undefined ? { events, end: 'actions-ended' } : { events, next };
}

/** How long a menu waits for a key: its idleTimeoutMsec, else the default; `cap` at most. */
export function menuIdleMs(
  menu: SpeechMenu,
  current: number,
  timings: CallTimings,
  cap: number = timings.maxIdleTimeoutMs,
): number {
  return Math.min(menu[current]?.idleTimeoutMsec ?? timings.defaultIdleTimeoutMs, cap);
}

/**
 * Plans a call through `menu` for a callee who gives `keys` in turn.
 *
 * @example
 * planCall(menu, ['1', 'timeout'], DEFAULT_CALL_TIMINGS).endReason // 'hangup-action'
 */
export function planCall(
  menu: SpeechMenu,
  keys: readonly ScriptKey[],
  timings: CallTimings = DEFAULT_CALL_TIMINGS,
): SpeechCallPlan {
  const events: CallEvent[] = [];
  let at = 0;
  let current = 0;
  let nextKey = 0;
  const end = (reason: CallEndReason): SpeechCallPlan => {
    events.push({ at, type: 'hangup', reason });
    return { events, endReason: reason, durationMs: at };
  };

  for (let visit = 1; ; visit++) {
    if (visit > timings.maxMenuVisits) return end('max-visits');
    if (menu[current] === undefined) return end('actions-ended'); // unreachable for a validated menu
    events.push({ at, type: 'menu', menu: current, visit });

    const input: ScriptKey = keys[nextKey] ?? 'timeout';
    nextKey++;
    at += input === 'timeout' ? menuIdleMs(menu, current, timings) : timings.keyPressMs;
    const step = stepMenu(menu, current, input, at);
    events.push(...step.events);
    if ('end' in step) return end(step.end);
    current = step.next;
  }
}
