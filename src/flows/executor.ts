/**
 * A reference executor of the provider's speechcall menu (docs/provider.md, "Message types"):
 * what the provider does with a menu JSON when the callee presses keys. It knows nothing of
 * flows, nodes or machines, only the JSON, which is what makes it a fair judge of the
 * compiler.
 *
 * Rules, as the provider states them: the call starts in `menu[0]`; a key runs `d<key>` if
 * defined, else `wrong`; silence (`timeout`) runs `wrong`; without `wrong` the call hangs up.
 * An action list runs in order: webhooks are posted, `hangup` ends the call, `gotoMenu`
 * continues in that menu. What happens after a list with neither is not stated, so it ends the
 * run as `ran-out` (the compiler never emits one).
 *
 * @example
 * executeMenu(menu, ['1', 'timeout']).steps.map((s) => s.entry) // ['d1', 'wrong']
 */
import { menuIndex, type SpeechMenu } from '../provider/menu.ts';

/** What the caller does: a key, or `timeout` for silence. */
export const CALLER_INPUTS = [
  '0',
  '1',
  '2',
  '3',
  '4',
  '5',
  '6',
  '7',
  '8',
  '9',
  '*',
  '#',
  'timeout',
] as const;

export interface PostedWebhook {
  url: string;
  body?: Record<string, unknown>;
  headers?: Record<string, string>;
}

export interface ExecutedStep {
  /** Index of the menu the input was given in. */
  menu: number;
  input: string;
  /** The `dtmfActions` entry that ran, or null when there was none (the provider hangs up). */
  entry: string | null;
  webhooks: PostedWebhook[];
  /** The menu the call continues in, or how it ended. */
  next: number | 'hangup' | 'ran-out';
}

export interface MenuRun {
  steps: ExecutedStep[];
  /** `waiting`: still in a menu when the inputs ran out. */
  end: 'waiting' | 'hangup' | 'ran-out';
  /** The menu waited in, when `end` is `waiting`. */
  menu: number | null;
  /** Inputs given after the call had ended. */
  ignored: string[];
}

/**
 * Plays `keys` against `menu` the way the provider would.
 *
 * @example
 * executeMenu([{ introUrl: 'a', dtmfActions: { d1: [{ action: 'hangup' }] } }], ['1']).end // 'hangup'
 */
export function executeMenu(menu: SpeechMenu, keys: readonly string[]): MenuRun {
  const steps: ExecutedStep[] = [];
  let at: number | 'hangup' | 'ran-out' = 0;
  let i = 0;
  for (; i < keys.length && typeof at === 'number'; i++) {
    const input = keys[i]!;
    if (!(CALLER_INPUTS as readonly string[]).includes(input)) {
      throw new Error(`not a caller input: "${input}" (keys 0-9, *, #, or timeout)`);
    }
    const item = menu[at];
    if (!item) throw new Error(`menu ${at} does not exist`);
    const dtmf = item.dtmfActions as Record<string, SpeechMenu[number]['dtmfActions']['wrong']>;
    const named = input === 'timeout' ? undefined : `d${input}`;
    const entry = named !== undefined && dtmf[named] ? named : dtmf.wrong ? 'wrong' : null;
    const step: ExecutedStep = { menu: at, input, entry, webhooks: [], next: 'hangup' };
    if (entry !== null) {
      step.next = 'ran-out';
      for (const action of dtmf[entry]!) {
        if (action.action === 'webhook') {
          step.webhooks.push({
            url: action.url,
            ...(action.body ? { body: action.body } : {}),
            ...(action.headers ? { headers: action.headers } : {}),
          });
        } else if (action.action === 'hangup') {
          step.next = 'hangup';
          break;
        } else {
          step.next = menuIndex(action.menu);
          break;
        }
      }
    }
    steps.push(step);
    at = step.next;
  }
  return {
    steps,
    end: typeof at === 'number' ? 'waiting' : at,
    menu: typeof at === 'number' ? at : null,
    ignored: keys.slice(i),
  };
}
