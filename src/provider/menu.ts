/**
 * The speechcall `menu` (docs/provider.md, "Message types"): an array of menus, each an intro,
 * an optional idle timeout and the actions per DTMF key. Every rule the provider states is
 * enforced here, so the flow compiler can check its output and the sandbox can reject what the
 * provider would.
 *
 * Rules: keys only d0..d9, d*, d#, wrong; each key runs a non-empty list of actions;
 * `gotoMenu.menu` is a 0-based index (integer or digit string) of a menu that exists;
 * webhook URLs are absolute http(s); nothing may follow a hangup ("nothing after it is
 * processed", so an action there is a mistake, flagged rather than silently dropped).
 *
 * @example
 * SpeechMenu.parse([
 *   { introUrl: 'https://cdn.example.com/a.mp3', dtmfActions: { d1: [{ action: 'hangup' }] } },
 * ]);
 */
import { z } from 'zod';
import { addRule } from './issues.ts';

/** The keys a menu may define, in the provider's spelling. */
export const DTMF_KEYS = [
  'd0',
  'd1',
  'd2',
  'd3',
  'd4',
  'd5',
  'd6',
  'd7',
  'd8',
  'd9',
  'd*',
  'd#',
  'wrong',
] as const;
export const DtmfKey = z.enum(DTMF_KEYS);
export type DtmfKey = z.infer<typeof DtmfKey>;

/** True for an absolute http: or https: URL. */
export function isHttpUrl(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const { protocol, hostname } = new URL(value);
  return (protocol === 'http:' || protocol === 'https:') && hostname !== '';
}

export const HttpUrl = z.string().refine(isHttpUrl, {
  message: 'must be an absolute http(s) URL',
  params: { rule: 'INVALID_URL' },
});

export const WebhookAction = z.strictObject({
  action: z.literal('webhook'),
  url: HttpUrl,
  /** Goes under the `action` key of the webhook payload (docs/provider.md, "Callbacks"). */
  body: z.record(z.string(), z.unknown()).optional(),
  headers: z.record(z.string(), z.string()).optional(),
});
export type WebhookAction = z.infer<typeof WebhookAction>;

export const HangupAction = z.strictObject({ action: z.literal('hangup') });
export type HangupAction = z.infer<typeof HangupAction>;

/** A menu index: a non-negative integer, or the same written as a digit string. */
export const MenuIndex = z.union([
  z.number().int().nonnegative(),
  z.string().regex(/^(0|[1-9][0-9]*)$/, 'must be a 0-based menu index'),
]);
export type MenuIndex = z.infer<typeof MenuIndex>;

export const GotoMenuAction = z.strictObject({ action: z.literal('gotoMenu'), menu: MenuIndex });
export type GotoMenuAction = z.infer<typeof GotoMenuAction>;

export const MenuAction = z.discriminatedUnion(
  'action',
  [WebhookAction, HangupAction, GotoMenuAction],
  { error: 'action must be one of webhook, hangup, gotoMenu' },
);
export type MenuAction = z.infer<typeof MenuAction>;

export const DtmfActions = z.partialRecord(DtmfKey, z.array(MenuAction).min(1), {
  // zod's issue type for records omits unrecognized_keys, which a partial record does raise.
  error: (issue) => {
    const raw = issue as { code?: string; keys?: string[] };
    if (raw.code !== 'unrecognized_keys') return undefined;
    const got = (raw.keys ?? []).map((k) => JSON.stringify(k)).join(', ');
    return `key not allowed: keys are d0..d9, d*, d#, wrong (got ${got})`;
  },
});
export type DtmfActions = z.infer<typeof DtmfActions>;

export const MenuItem = z.strictObject({
  /** URL or provider identifier of the intro audio. */
  introUrl: z.string().min(1),
  idleTimeoutMsec: z.number().int().positive().optional(),
  dtmfActions: DtmfActions,
});
export type MenuItem = z.infer<typeof MenuItem>;

/** The index a gotoMenu action points at, as a number. */
export function menuIndex(index: MenuIndex): number {
  return typeof index === 'number' ? index : Number.parseInt(index, 10);
}

/**
 * Builds the menu array schema; `missing` is the message when the field is absent (the
 * message schema names the field for its speechcall variant).
 */
export function speechMenu(missing = 'menu is required') {
  return (
    z
      .array(MenuItem, {
        error: (issue) => (issue.input === undefined ? missing : 'menu must be an array of menus'),
      })
      .min(1, 'a speechcall needs at least one menu')
      // Runs even when some menu is malformed elsewhere, so one answer lists every broken
      // reference; hence the defensive reading of the (possibly invalid) input.
      .superRefine((menus, ctx) => crossCheck(menus as unknown[], ctx), {
        when: (payload) => Array.isArray(payload.value),
      })
  );
}

export const SpeechMenu = speechMenu();
export type SpeechMenu = z.infer<typeof SpeechMenu>;

function crossCheck(menus: unknown[], ctx: Parameters<typeof addRule>[0]): void {
  menus.forEach((menu, m) => {
    const dtmf = isRecord(menu) && isRecord(menu.dtmfActions) ? menu.dtmfActions : {};
    for (const [key, actions] of Object.entries(dtmf)) {
      if (!Array.isArray(actions)) continue;
      const hangupAt = actions.findIndex((a) => isRecord(a) && a.action === 'hangup');
      if (hangupAt !== -1 && hangupAt < actions.length - 1) {
        addRule(
          ctx,
          [m, 'dtmfActions', key, hangupAt + 1],
          'ACTION_AFTER_HANGUP',
          `action ${hangupAt + 1} follows a hangup (action ${hangupAt}) and would never run`,
        );
      }
      actions.forEach((action, a) => {
        if (!isRecord(action) || action.action !== 'gotoMenu') return;
        const parsed = MenuIndex.safeParse(action.menu);
        if (!parsed.success) return; // reported by the item schema
        if (menuIndex(parsed.data) >= menus.length) {
          addRule(
            ctx,
            [m, 'dtmfActions', key, a, 'menu'],
            'UNKNOWN_MENU',
            `gotoMenu ${JSON.stringify(action.menu)} names no menu (the last index is ${menus.length - 1})`,
          );
        }
      });
    }
  });
}

// ---------------------------------------------------------------------------------------
// The same rules by hand, for the menus a server renders itself (one per call)

const ITEM_KEYS = new Set(['introUrl', 'idleTimeoutMsec', 'dtmfActions']);
const WEBHOOK_KEYS = new Set(['action', 'url', 'body', 'headers']);
const GOTO_KEYS = new Set(['action', 'menu']);
const ACTION_ONLY = new Set(['action']);
const DTMF_KEY_SET: ReadonlySet<string> = new Set(DTMF_KEYS);
const MENU_INDEX = /^(0|[1-9][0-9]*)$/;

// Every tracking webhook of a call's menu has the same URL (dozens per call, thousands of
// calls): one URL parse for each distinct URL, not one per webhook.
const httpUrls = new Set<string>();

function isKnownHttpUrl(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  if (httpUrls.has(value)) return true;
  if (!isHttpUrl(value)) return false;
  if (httpUrls.size >= 256) httpUrls.clear();
  httpUrls.add(value);
  return true;
}

/** A plain object (as JSON gives) whose keys are all in `allowed`, none undefined. */
function isPlainWith(
  value: unknown,
  allowed: ReadonlySet<string>,
): value is Record<string, unknown> {
  if (!isPlain(value)) return false;
  for (const key in value) if (!allowed.has(key) || value[key] === undefined) return false;
  return true;
}

// zod copies objects: one with another prototype or symbol keys would come out different
function isPlain(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    Object.getPrototypeOf(value) === Object.prototype &&
    Object.getOwnPropertySymbols(value).length === 0
  );
}

/**
 * A `z.record(z.string(), ...)` the schema returns unchanged: plain, with no own `__proto__`
 * key (zod leaves it out of its copy) and no undefined value; `strings`: string values only.
 */
function isPlainRecord(value: unknown, strings: boolean): boolean {
  if (!isPlain(value)) return false;
  for (const key in value) {
    const v = value[key];
    if (key === '__proto__' || v === undefined || (strings && typeof v !== 'string')) return false;
  }
  return true;
}

function isMenuIndex(value: unknown, menus: number): boolean {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 && value < menus;
  return typeof value === 'string' && MENU_INDEX.test(value) && menuIndex(value) < menus;
}

function isAction(value: unknown, menus: number): boolean {
  if (!isPlain(value)) return false;
  switch (value.action) {
    case 'hangup':
      return isPlainWith(value, ACTION_ONLY);
    case 'gotoMenu':
      return isPlainWith(value, GOTO_KEYS) && isMenuIndex(value.menu, menus);
    case 'webhook':
      return (
        isPlainWith(value, WEBHOOK_KEYS) &&
        isKnownHttpUrl(value.url) &&
        (value.body === undefined || isPlainRecord(value.body, false)) &&
        (value.headers === undefined || isPlainRecord(value.headers, true))
      );
    default:
      return false;
  }
}

function isMenuItem(value: unknown, menus: number): boolean {
  if (!isPlainWith(value, ITEM_KEYS)) return false;
  const { introUrl, idleTimeoutMsec, dtmfActions } = value;
  if (typeof introUrl !== 'string' || introUrl.length === 0) return false;
  if (
    idleTimeoutMsec !== undefined &&
    !(Number.isSafeInteger(idleTimeoutMsec) && (idleTimeoutMsec as number) > 0)
  )
    return false;
  if (!isPlain(dtmfActions)) return false;
  for (const key in dtmfActions) {
    const actions = dtmfActions[key];
    if (!DTMF_KEY_SET.has(key) || !Array.isArray(actions) || actions.length === 0) return false;
    for (let a = 0; a < actions.length; a++) {
      if (!isAction(actions[a], menus)) return false;
      // nothing after a hangup
      if ((actions[a] as MenuAction).action === 'hangup' && a < actions.length - 1) return false;
    }
  }
  return true;
}

/**
 * A menu checked by hand against every rule of `SpeechMenu`, without zod's copy of it: a
 * server renders one per call, dozens of actions each, and the schema's walk allocates
 * several times the menu's own size. When this returns the menu, `SpeechMenu` accepts it and
 * its output equals the input (so this returns the input itself); anything else, every menu
 * that breaks a rule included, is undefined: left to the schema, which names the problem.
 *
 * @example
 * parseSpeechMenuFast(menu) ?? SpeechMenu.parse(menu)
 */
export function parseSpeechMenuFast(input: unknown): SpeechMenu | undefined {
  if (!Array.isArray(input) || input.length === 0) return undefined;
  for (let m = 0; m < input.length; m++) {
    if (!isMenuItem(input[m], input.length)) return undefined;
  }
  return input as SpeechMenu;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
