/**
 * Rendering a compiled flow for one call: the provider menu with the call's language, vars
 * and signed tokens, and follow-up messages with their templates filled in.
 *
 * Every action list starts with the tracking webhook (POST to our hook URL, body `{ token }`
 * naming call, node and input), then the flow's own webhooks as given, then `gotoMenu` with
 * the target's index or `hangup`. Outcomes and sends are ours: they run when the tracking
 * webhook arrives, so they do not appear in the provider JSON.
 *
 * The provider runs its `wrong` entry for silence and for any key without an entry, and its
 * webhook carries only the body we wrote (docs/provider.md, "Callbacks"). So every key a node
 * does not handle gets an entry of its own, running what `wrong` runs with a token naming the
 * key; the `wrong` entry is then left with silence, and its token says `timeout`.
 *
 * @example
 * renderMenu(compiled, { vars, lang: 'uk', hookUrl, tokenFor: (node, key) => sign(node, key) });
 */
import { AppError } from '../errors.ts';
import type { MenuAction, SpeechMenu } from '../provider/menu.ts';
import type { CompiledFlow } from './compile.ts';
import { FLOW_KEYS, type Localized, type SendMessage } from './schema.ts';
import { renderDeep, renderTemplate } from './template.ts';
import {
  type CompiledAction,
  type CompiledNode,
  type MenuInput,
  type NodeKey,
  promptLabel,
  SILENCE,
  type SpokenPrompt,
} from './unroll.ts';

/** Stands in for the hook URL in `menuTemplate` (`.invalid` can never resolve, RFC 2606). */
export const TEMPLATE_HOOK_URL = 'https://switchboard.invalid/hooks/speechcall';

/** The provider's name of a key: `1` -> `d1`, `wrong` stays. */
export function dtmfName(key: NodeKey): string {
  return key === 'wrong' ? 'wrong' : `d${key}`;
}

export interface BuildMenuOptions {
  lang: string;
  render: (text: string) => string;
  /**
   * The URL a `say:` prompt is served at (src/speech/prompts.ts), its templates still in it.
   * Unset: the prompt as people read it (`say: <text>`), as the compiled template shows it.
   */
  say?: (prompt: SpokenPrompt) => string;
  hookUrl: string;
  hookHeaders?: Record<string, string>;
  tokenFor: (node: string, input: MenuInput) => string;
}

// A call's menu is rendered per call and kept until stored; the actions that are the same in
// every call (hangup, gotoMenu n) are shared, frozen, instead of copied into each menu.
const HANGUP: MenuAction = Object.freeze({ action: 'hangup' });

/** Menu indexes below this share one frozen gotoMenu action; past it, each call gets its own. */
const SHARED_GOTO_LIMIT = 1024;
// Module-level: frozen, and a function of the index alone, so every caller may share them.
const sharedGotoActions: MenuAction[] = [];

function gotoMenu(index: number): MenuAction {
  const shared = sharedGotoActions[index];
  if (shared) return shared;
  const action: MenuAction = Object.freeze({ action: 'gotoMenu', menu: index });
  if (index < SHARED_GOTO_LIMIT) sharedGotoActions[index] = action;
  return action;
}

// Module-level: a pure function of the node list it is keyed by, and weakly held, so an entry
// lives no longer than its compiled flow.
const menuIndexByNodeList = new WeakMap<readonly CompiledNode[], Map<string, number>>();

/** Each node's menu index by id (kept per compiled node list: every call of it asks). */
function indexesOf(nodes: readonly CompiledNode[]): Map<string, number> {
  let indexOf = menuIndexByNodeList.get(nodes);
  if (!indexOf) {
    indexOf = new Map(nodes.map((n) => [n.id, n.index]));
    menuIndexByNodeList.set(nodes, indexOf);
  }
  return indexOf;
}

/** The provider menu of some nodes; `renderMenu` and the compiler's template both use it. */
export function buildMenu(nodes: readonly CompiledNode[], opts: BuildMenuOptions): SpeechMenu {
  const indexOf = indexesOf(nodes);
  // the flow's webhooks and the goto or hangup of one key (the tracking webhook goes first)
  const providerActions = (actions: readonly CompiledAction[]): MenuAction[] => {
    const out: MenuAction[] = [];
    for (const action of actions) {
      if (action.type === 'webhook') {
        out.push({
          action: 'webhook',
          url: opts.render(action.url),
          ...(action.body ? { body: renderWith(action.body, opts.render) } : {}),
          ...(action.headers ? { headers: renderWith(action.headers, opts.render) } : {}),
        });
      } else if (action.type === 'goto') {
        out.push(gotoMenu(indexOf.get(action.node)!));
      } else if (action.type === 'hangup') {
        out.push(HANGUP);
      }
    }
    return out;
  };
  const tracking = (node: string, input: MenuInput): MenuAction => ({
    action: 'webhook',
    url: opts.hookUrl,
    body: { token: opts.tokenFor(node, input) },
    ...(opts.hookHeaders ? { headers: opts.hookHeaders } : {}),
  });
  return nodes.map((node) => {
    const dtmfActions: Record<string, MenuAction[]> = {};
    // rendered once per node: every unhandled key's entry shares these action objects
    const wrong = providerActions(node.keys.wrong ?? []);
    // every key has an entry: its own actions, or (a key the node does not handle) wrong's
    for (const key of FLOW_KEYS) {
      const actions = node.keys[key];
      dtmfActions[dtmfName(key)] = [
        tracking(node.id, key),
        ...(actions ? providerActions(actions) : wrong),
      ];
    }
    // so the provider runs `wrong` on silence alone
    dtmfActions.wrong = [tracking(node.id, SILENCE), ...wrong];
    const intro = node.intro[opts.lang] ?? Object.values(node.intro)[0]!;
    return {
      introUrl:
        typeof intro === 'string'
          ? opts.render(intro)
          : opts.say
            ? opts.say(intro)
            : promptLabel(intro),
      ...(node.timeoutMs !== undefined ? { idleTimeoutMsec: node.timeoutMs } : {}),
      dtmfActions,
    };
  });
}

function renderWith<T>(value: T, render: (text: string) => string): T {
  if (typeof value === 'string') return render(value) as T;
  if (Array.isArray(value)) return value.map((v) => renderWith(v, render)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, renderWith(v, render)]),
    ) as T;
  }
  return value;
}

/**
 * The call's language: the requested one if the flow has it, else the flow's default.
 * An unknown language is an error naming `lang`.
 *
 * @example
 * resolveLanguage(compiled, undefined) // 'en'
 */
export function resolveLanguage(compiled: CompiledFlow, lang?: string | null): string {
  if (lang === undefined || lang === null) return compiled.languages[0]!;
  if (compiled.languages.includes(lang)) return lang;
  throw new AppError('INVALID_LANGUAGE', `flow "${compiled.id}" has no language "${lang}"`, [
    {
      path: 'lang',
      code: 'UNKNOWN_LANGUAGE',
      message: `must be one of ${compiled.languages.join(', ')}`,
    },
  ]);
}

export interface RenderMenuOptions {
  /** Validated vars (see `validateVars`). */
  vars: Readonly<Record<string, unknown>>;
  /** Defaults to the flow's first language. */
  lang?: string;
  /** Where the provider posts tracking webhooks, e.g. `${PUBLIC_URL}/hooks/speechcall`. */
  hookUrl: string;
  /** Extra headers on every tracking webhook (a shared secret, for example). */
  hookHeaders?: Record<string, string>;
  /** The signed token for one (node, input) of this call; see `signNodeToken`. */
  tokenFor: (node: string, input: MenuInput) => string;
  /**
   * The URL of a `say:` prompt for this call (see `BuildMenuOptions.say`); unset: the words
   * it would say, `say: <text>` with the vars filled in.
   */
  say?: (prompt: SpokenPrompt) => string;
}

/**
 * The provider menu for one call.
 *
 * @example
 * renderMenu(compiled, {
 *   vars: { name: 'Ann', date: '2025-03-01' },
 *   lang: 'uk',
 *   hookUrl: 'https://sb.example.com/hooks/speechcall',
 *   tokenFor: (node, key) => signNodeToken({ callId, node, key }, secret),
 * })[0].dtmfActions.d1[0] // { action: 'webhook', url: '.../hooks/speechcall', body: { token } }
 */
export function renderMenu(compiled: CompiledFlow, opts: RenderMenuOptions): SpeechMenu {
  const lang = resolveLanguage(compiled, opts.lang);
  return buildMenu(compiled.nodes, {
    lang,
    render: (text) => renderTemplate(text, opts.vars),
    hookUrl: opts.hookUrl,
    ...(opts.hookHeaders ? { hookHeaders: opts.hookHeaders } : {}),
    tokenFor: opts.tokenFor,
    // without a prompt service (the CLI, tests): the words the call would hear
    say: opts.say ?? ((p) => promptLabel({ ...p, say: renderTemplate(p.say, opts.vars) })),
  });
}

/**
 * A follow-up message ready for the outbox (a provider message object, docs/provider.md,
 * "Sending: POST /bat/messagelist"), `customerMessageId` aside.
 */
export interface RenderedMessage {
  type: SendMessage['type'];
  text?: string;
  from?: string;
  to?: string;
  ttl?: number;
  dtSend?: string;
  dtExpire?: string;
  messageData?: Record<string, unknown>;
  fallbacks?: Array<{
    type: SendMessage['type'];
    text?: string;
    from?: string;
    to?: string;
    messageData?: Record<string, unknown>;
  }>;
}

export interface MessageContext {
  vars: Readonly<Record<string, unknown>>;
  lang: string;
  /** The callee: the default `to`. */
  to?: string | null;
  /** The call's sender: the default `from`. */
  from?: string | null;
}

/** One value of a localized text, for `lang` (else the first given). */
export function pickLanguage(value: Localized, lang: string): string {
  if (typeof value === 'string') return value;
  return value[lang] ?? Object.values(value)[0] ?? '';
}

/**
 * A `send` template as a message: language picked, templates rendered, `to` and `from`
 * defaulted to the callee and the call's sender.
 *
 * @example
 * renderMessage({ type: 'sms', text: 'Hi {{name}}' }, { vars: { name: 'Ann' }, lang: 'en', to: '+380501234567' })
 * // { type: 'sms', text: 'Hi Ann', to: '+380501234567' }
 */
export function renderMessage(template: SendMessage, ctx: MessageContext): RenderedMessage {
  const { text, fallback, fallbacks: list, ...rest } = template;
  // one `fallback` is a list of one: validateMessage reads both forms the same way
  const fallbacks = fallback !== undefined ? [fallback, ...(list ?? [])] : list;
  const out: RenderedMessage = renderDeep(rest, ctx.vars);
  if (text !== undefined) out.text = renderTemplate(pickLanguage(text, ctx.lang), ctx.vars);
  if (out.to === undefined && ctx.to) out.to = ctx.to;
  if (out.from === undefined && ctx.from) out.from = ctx.from;
  if (fallbacks) {
    out.fallbacks = fallbacks.map((fb) => {
      const { text: fbText, ...fbRest } = fb;
      const rendered: NonNullable<RenderedMessage['fallbacks']>[number] = renderDeep(
        fbRest,
        ctx.vars,
      );
      if (fbText !== undefined)
        rendered.text = renderTemplate(pickLanguage(fbText, ctx.lang), ctx.vars);
      if (rendered.to === undefined) rendered.to = out.to;
      if (rendered.from === undefined) rendered.from = out.from;
      return rendered;
    });
  }
  return out;
}
