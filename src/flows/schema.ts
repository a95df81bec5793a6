/**
 * The flow language (README.md, "The flow language") as one zod schema.
 *
 * The schema describes what a person writes in `flows/<id>.yaml`, nothing more: durations
 * stay strings, prompts stay a string or a per-language map. Normalising is the compiler's
 * job, so that the JSON Schema exported from here (`flowJsonSchema`) is exactly the input
 * language an editor should complete.
 *
 * @example
 * FlowDefinition.parse({ menus: { main: { intro: 'ivr_1', keys: { '1': ['hangup'] } } } });
 */
import { z } from 'zod';
import { CASCADE_MESSAGE_TYPES } from '../provider/cascade.ts';

/** Keys a caller can press, in the order the compiler emits them. */
export const FLOW_KEYS = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '#'] as const;
export const FlowKey = z.enum(FLOW_KEYS);
export type FlowKey = z.infer<typeof FlowKey>;

/** Statuses of the call's own message (docs/provider.md, "Statuses") that `on:` can react to. */
export const CALL_MESSAGE_STATUSES = [
  'accepted',
  'rejected',
  'sent',
  'delivered',
  'read',
  'failed',
  'expired',
] as const;
export const CallMessageStatus = z.enum(CALL_MESSAGE_STATUSES);
export type CallMessageStatus = z.infer<typeof CallMessageStatus>;

/**
 * Message types a `send` action may use: every message type of the provider except the speech
 * call itself (`viber_service` is read as `viber_trans`).
 */
export const SEND_TYPES = [
  'sms',
  'viber_trans',
  'viber_service',
  'viber_promo',
  'viber_carousel',
  'viber_survey',
  'viber_otp',
  'viber_session',
  'rcs',
  'flashcall_callback',
  'flashcall',
  // not a message type of the messagelist: one message through the cascade API
  'cascade',
] as const;

// Menu names end up in node ids (`main/v2/r1`), follow-up ids (`main:1:0`) and xstate state
// keys, so '/', ':', '.' and '#' are kept out of them.
export const MenuName = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/, 'a menu name is a letter, then letters, digits, _ or -')
  .meta({ id: 'MenuName', description: 'The name of a menu of this flow.' });

export const ParamName = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]{0,63}$/,
    'a param name is a letter or _, then letters, digits or _',
  );

/** A language a flow's prompts come in (a tag like en or pt-BR), as `languages` lists them. */
export const PromptLanguage = z
  .string()
  .regex(/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, 'a language is a code like en, uk or pt-BR');

export const OutcomeName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'an outcome is a word like confirmed or no-input')
  .meta({ description: 'Recorded as the call outcome; the last one on the path wins.' });

export const Duration = z
  .string()
  .regex(
    /^\d+(\.\d+)?\s*(ms|s|m|h|d)$/,
    'a duration is a number and a unit: 500ms, 8s, 30m, 2h, 1d',
  )
  .meta({
    id: 'Duration',
    description: 'A duration such as 500ms, 8s, 30m, 2h or 1d.',
    examples: ['8s', '30m'],
  });
export type Duration = z.infer<typeof Duration>;

/** A string for every language, or one per language code. */
export const Localized = z
  .union([z.string().min(1), z.record(PromptLanguage, z.string().min(1))])
  .meta({
    id: 'Localized',
    description: 'One value for all languages, or a map from language code to value.',
  });
export type Localized = z.infer<typeof Localized>;

/** The slowest and fastest `rate` a `say:` prompt may ask for (src/speech/engine.ts agrees). */
export const SAY_RATE_MIN = 0.5;
export const SAY_RATE_MAX = 2;

/**
 * A prompt written as text: Switchboard renders it to audio (docs/speech.md) and the menu
 * plays the URL it serves. `{{param}}` templates are filled in per call.
 */
export const SayPrompt = z
  .strictObject({
    say: Localized.meta({
      description:
        'What the call says: one text, or one per language. `{{param}}` templates are filled in per call.',
    }),
    voice: z
      .string()
      .regex(/^[A-Za-z0-9_+-]{1,64}$/, 'a voice is a name of letters, digits, _, + or -')
      .optional()
      .meta({ description: "The engine's voice; unset: the language's default voice." }),
    rate: z
      .number()
      .min(SAY_RATE_MIN)
      .max(SAY_RATE_MAX)
      .optional()
      .meta({
        description: `Speed relative to normal, ${SAY_RATE_MIN} to ${SAY_RATE_MAX}; unset: 1.`,
      }),
  })
  .meta({ id: 'SayPrompt', description: 'A prompt spoken from text.' });
export type SayPrompt = z.infer<typeof SayPrompt>;

/** One language's prompt: an audio URL, a provider audio id, or text to speak. */
const PromptValue = z.union([z.string().min(1), SayPrompt]);
export type PromptValue = z.infer<typeof PromptValue>;

export const Prompt = z.union([PromptValue, z.record(PromptLanguage, PromptValue)]).meta({
  id: 'Prompt',
  description:
    'Audio URL, provider audio id, or `{ say: text }`: the same for every language, or one per language. `{{param}}` templates allowed.',
});
export type Prompt = z.infer<typeof Prompt>;

export const ParamType = z
  .enum(['string', 'number', 'integer', 'boolean', 'phone', 'date', 'url'])
  .meta({ id: 'ParamType', description: 'phone is E.164 (normalised); date is YYYY-MM-DD.' });
export type ParamType = z.infer<typeof ParamType>;

export const ParamSpec = z.union([
  ParamType,
  z.strictObject({
    type: ParamType,
    optional: z.boolean().optional(),
    default: z.union([z.string(), z.number(), z.boolean()]).optional(),
    description: z.string().optional(),
  }),
]);
export type ParamSpec = z.infer<typeof ParamSpec>;

const SendFallback = z.strictObject({
  type: z.enum(SEND_TYPES),
  text: Localized.optional(),
  from: z.string().optional(),
  to: z.string().optional(),
  messageData: z.record(z.string(), z.unknown()).optional(),
});

/**
 * A provider message (docs/provider.md, "Message types") to send as a follow-up; `to`
 * defaults to the callee.
 */
export const SendMessage = z
  .strictObject({
    type: z.enum(SEND_TYPES),
    text: Localized.optional(),
    from: z.string().optional().meta({ description: "Sender; defaults to the call's `from`." }),
    to: z.string().optional().meta({ description: 'Recipient; defaults to the callee.' }),
    ttl: z.number().int().positive().optional(),
    dtSend: z.string().optional(),
    dtExpire: z.string().optional(),
    messageData: z.record(z.string(), z.unknown()).optional(),
    messageType: z
      .enum(CASCADE_MESSAGE_TYPES)
      .optional()
      .meta({ description: 'cascade only: transaction, promo, viber_survey or flashcall' }),
    surveyOptions: z
      .array(z.string())
      .optional()
      .meta({ description: 'cascade viber_survey only: 2 to 5 answers' }),
    variables: z
      .array(
        z.strictObject({
          id: z.number().int(),
          type: z.enum(['name', 'url', 'short_url']).optional(),
          value: z.string(),
        }),
      )
      .optional()
      .meta({ description: "cascade only: the values of the text's %name=1% placeholders" }),
    endpoint: z
      .enum(['general', 'tg-viber'])
      .optional()
      .meta({ description: 'cascade only: the general endpoint, or the Telegram-first one' }),
    fallback: SendFallback.optional().meta({
      description: 'One message to send instead when this one fails or expires.',
    }),
    fallbacks: z
      .array(SendFallback)
      .optional()
      .meta({ description: 'Messages to try in turn when this one fails or expires.' }),
  })
  .meta({
    id: 'SendMessage',
    description:
      'A message of the provider (docs/provider.md); strings may use `{{param}}` templates.',
  });
export type SendMessage = z.infer<typeof SendMessage>;

const WebhookUrl = z.string().regex(/^https?:\/\/\S+$/, 'a webhook URL is an absolute http(s) URL');

export const WebhookSpec = z.union([
  WebhookUrl,
  z.strictObject({
    url: WebhookUrl,
    body: z.record(z.string(), z.unknown()).optional(),
    headers: z.record(z.string(), z.string()).optional(),
  }),
]);
export type WebhookSpec = z.infer<typeof WebhookSpec>;

/**
 * The name of one of the user's endpoints (`/v1/endpoints`, ENDPOINTS_FILE), as `notify:`
 * names it: a slug. Endpoints live in the database, so a flow may name one that does not
 * exist yet; a call that reaches the action then records a problem instead. The same rule
 * as the endpoints API's (src/events/endpoints.ts).
 */
export const ENDPOINT_NAME_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;
export const EndpointName = z
  .string()
  .regex(
    ENDPOINT_NAME_PATTERN,
    'an endpoint name is a slug: lower-case letters, digits and -, at most 64, not starting or ending with -',
  )
  .meta({
    id: 'EndpointName',
    description: 'The name of one of your endpoints (a slug, like `crm`).',
    examples: ['crm'],
  });

export const NotifySpec = z
  .union([
    EndpointName,
    z.strictObject({
      endpoint: EndpointName,
      data: z.record(z.string(), z.unknown()).optional().meta({
        description:
          "Extra fields sent with the call's data (`data.data`); strings may use `{{param}}` templates.",
      }),
    }),
  ])
  .meta({
    id: 'NotifySpec',
    description:
      "Switchboard sends a signed, retried `flow.notify` event with the call's data to this endpoint.",
  });
export type NotifySpec = z.infer<typeof NotifySpec>;

export const GotoAction = z.strictObject({ goto: MenuName });
export const OutcomeAction = z.strictObject({ outcome: OutcomeName });
export const SendAction = z.strictObject({ send: SendMessage });
export const WebhookActionSpec = z.strictObject({
  webhook: WebhookSpec.meta({ description: 'Called by the provider itself, as given.' }),
});
export const NotifyAction = z.strictObject({ notify: NotifySpec });
export const HangupActionSpec = z.literal('hangup');
/** Ours: the callee goes on the opt-out list (src/opt-outs/) when the key's webhook arrives. */
export const OptOutActionSpec = z.literal('opt-out').meta({
  description:
    'Put the callee on the opt-out list: no later message or call reaches them (docs/opt-outs.md).',
});

/** The action kinds by their key, so errors can name the one the author meant. */
export const ACTION_KINDS = {
  goto: GotoAction,
  outcome: OutcomeAction,
  send: SendAction,
  webhook: WebhookActionSpec,
  notify: NotifyAction,
} as const;

export const Action = z
  .union([
    HangupActionSpec,
    OptOutActionSpec,
    GotoAction,
    OutcomeAction,
    SendAction,
    WebhookActionSpec,
    NotifyAction,
  ])
  .meta({ id: 'Action' });
export type Action = z.infer<typeof Action>;

export const ActionList = z
  .array(Action)
  .min(1, 'an action list needs at least one action')
  .meta({ id: 'ActionList' });
export type ActionList = z.infer<typeof ActionList>;

/** What `on:` may do: the call is over or elsewhere, so no goto, hangup or menu webhook. */
export const ReactionAction = z.union([OptOutActionSpec, OutcomeAction, SendAction, NotifyAction]);
export type ReactionAction = z.infer<typeof ReactionAction>;
export const ReactionList = z.array(ReactionAction).min(1).meta({ id: 'ReactionList' });
export type ReactionList = z.infer<typeof ReactionList>;

export const Menu = z
  .strictObject({
    description: z.string().optional(),
    intro: Prompt,
    timeout: Duration.optional().meta({
      description: 'How long to wait for a key (idleTimeoutMsec).',
    }),
    retries: z
      .number()
      .int()
      .min(0)
      .max(9)
      .optional()
      .meta({ description: 'How many more times a wrong key or silence replays the menu.' }),
    reprompt: Prompt.optional().meta({ description: 'Played instead of intro on a retry.' }),
    keys: z
      .partialRecord(FlowKey, ActionList)
      .optional()
      .meta({ description: 'Actions per key: 0-9, * and # (quote them in YAML).' }),
    wrong: ActionList.optional().meta({
      description:
        'Run on a wrong key or silence once the retries are used up; when absent, the call hangs up.',
    }),
  })
  .meta({ id: 'Menu' });
export type Menu = z.infer<typeof Menu>;

export const Reactions = z.strictObject({
  accepted: ReactionList.optional(),
  rejected: ReactionList.optional(),
  sent: ReactionList.optional(),
  delivered: ReactionList.optional(),
  read: ReactionList.optional(),
  failed: ReactionList.optional(),
  expired: ReactionList.optional(),
  noResponse: z
    .strictObject({ after: Duration, do: ReactionList })
    .optional()
    .meta({ description: 'A durable timer from call start, cancelled by the first key.' }),
});
export type Reactions = z.infer<typeof Reactions>;

/** What a path of `assert.paths` may press: a key (a number or a string) or `timeout` for silence. */
const AssertedInput = z.union([z.number().int().min(0).max(9), z.enum([...FLOW_KEYS, 'timeout'])]);

export const AssertedPath = z
  .strictObject({
    name: z.string().min(1).max(200).optional().meta({
      description: 'What the path stands for, named in the message when it fails.',
    }),
    keys: z
      .array(AssertedInput)
      .min(1)
      .meta({ description: 'Keys from the start until the call hangs up; `timeout` is silence.' }),
    outcome: OutcomeName.optional().meta({ description: 'The outcome the path ends with.' }),
    not: z
      .union([OutcomeName, z.array(OutcomeName).min(1)])
      .optional()
      .meta({ description: 'An outcome (or several) the path must not end with.' }),
  })
  .refine(
    (p) => p.outcome !== undefined || p.not !== undefined,
    'a path names the outcome it ends with (outcome) or one it must not end with (not)',
  )
  .meta({
    id: 'AssertedPath',
    description:
      'A key sequence from the start until the call hangs up, with the outcome it ends with (outcome), or must not end with (not), or both.',
  });
export type AssertedPath = z.infer<typeof AssertedPath>;

/**
 * Properties of the flow that `switchboard flows validate` proves over every path of keys
 * (docs/flows.md, "Assertions"). Not part of the compiled flow: adding or changing them
 * leaves a flow's version as it was.
 */
export const FlowAssertions = z
  .strictObject({
    outcomeOnEveryPath: z.boolean().optional().meta({
      description: 'Every path of keys ends with an outcome. On (true) unless set to false.',
    }),
    maxMessages: z
      .partialRecord(z.enum([...SEND_TYPES, 'total']), z.number().int().min(0))
      .optional()
      .meta({
        description:
          'At most this many messages of a type in one call (`total`: of any type), counting `send` actions on the path, their fallbacks, and the `on:` reactions that may run in the same call.',
      }),
    maxDuration: Duration.optional().meta({
      description:
        'The longest call, from answer to hang-up, over every path: each menu the path plays (every retry and every repeat is one) counts its longest prompt, from promptLengths, and then its whole timeout.',
    }),
    promptLengths: z.record(z.string().min(1), Duration).optional().meta({
      description:
        'The declared length of each prompt, keyed by the prompt as written in intro or reprompt (an audio URL or a provider id; a spoken one as `say: <text>`).',
    }),
    defaultPromptLength: Duration.optional().meta({
      description: 'How long a prompt missing from promptLengths plays.',
    }),
    defaultTimeout: Duration.optional().meta({
      description:
        "The provider's wait for a key in a menu without `timeout` (its docs give no default): needed by maxDuration when a menu has none.",
    }),
    paths: z.array(AssertedPath).optional().meta({
      description: 'Key sequences and the outcome each ends with (or must not end with).',
    }),
    reachable: z.array(OutcomeName).optional().meta({
      description: 'Outcomes some call can end with, by its keys or by an `on:` reaction.',
    }),
    unreachable: z.array(OutcomeName).optional().meta({
      description: 'Outcomes no call ends with, whatever its keys and whatever `on:` reacts to.',
    }),
  })
  .meta({
    id: 'FlowAssertions',
    description:
      'Properties proven over every path of the compiled flow by `switchboard flows validate`.',
  });
export type FlowAssertions = z.infer<typeof FlowAssertions>;

/**
 * What ends an attempt without an outcome the flow recorded: `failed` (the call never got
 * through: rejected, failed or expired; a message rejected, failed or expired) and
 * `no-outcome` (a call ended with none). A message campaign retries on `failed` only.
 */
export const ATTEMPT_RESULTS = ['failed', 'no-outcome'] as const;

export const CampaignRetryPolicy = z
  .strictObject({
    on: z
      .array(z.union([z.enum(ATTEMPT_RESULTS), OutcomeName]))
      .min(1)
      .meta({
        description:
          'What calls for another attempt: `failed` (the call did not get through), `no-outcome` (it ended without one), or an outcome the flow records (`no-input`).',
        example: ['failed', 'no-input'],
      }),
    after: Duration.meta({ description: 'How long after an attempt ends the next may start.' }),
    maxAttempts: z.number().int().min(1).max(10),
  })
  .meta({ id: 'CampaignRetryPolicy' });
export type CampaignRetryPolicy = z.infer<typeof CampaignRetryPolicy>;

/** A flow's defaults for the campaigns that call with it (docs/campaigns.md). */
export const FlowCampaignDefaults = z
  .strictObject({
    retry: CampaignRetryPolicy.optional().meta({
      description: 'Attempts of a campaign calling with this flow that gives no retry of its own.',
    }),
  })
  .meta({ id: 'FlowCampaignDefaults' });

export const FlowDefinition = z
  .strictObject({
    $schema: z.string().optional(),
    title: z.string().optional(),
    description: z.string().optional(),
    params: z.record(ParamName, ParamSpec).optional(),
    languages: z
      .array(PromptLanguage)
      .min(1)
      .optional()
      .meta({ description: "The call's `lang` picks prompts; the first is the default." }),
    start: MenuName.optional().meta({ description: 'The first menu; default: the first listed.' }),
    menus: z
      .record(MenuName, Menu)
      .refine((m) => Object.keys(m).length > 0, 'a flow needs at least one menu'),
    on: Reactions.optional(),
    campaign: FlowCampaignDefaults.optional(),
    assert: FlowAssertions.optional(),
  })
  .meta({
    title: 'Switchboard flow',
    description: 'An IVR flow: menus compiled to a provider speechcall menu and a state machine.',
  });
export type FlowDefinition = z.infer<typeof FlowDefinition>;

/**
 * The JSON Schema of the flow language, for editors (`flows/schema.json`).
 *
 * @example
 * writeFileSync('flows/schema.json', JSON.stringify(flowJsonSchema(), null, 2));
 */
export function flowJsonSchema(): Record<string, unknown> {
  // Named parts (`.meta({ id })`) become $defs, so editors show Menu, Action, ... by name.
  return z.toJSONSchema(FlowDefinition, { target: 'draft-2020-12', io: 'input' }) as Record<
    string,
    unknown
  >;
}

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Milliseconds of a duration string.
 *
 * @example
 * parseDuration('8s') // 8000
 */
export function parseDuration(value: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/.exec(value);
  if (!m) throw new Error(`not a duration: ${value}`);
  return Math.round(Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS]);
}
