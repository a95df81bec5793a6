/**
 * The language of flow test files (`flows/<id>.test.yaml`) as one zod schema, exported to
 * JSON Schema for editors as `flows/test.schema.json` (`switchboard flows schema --tests`).
 *
 * A file names calls (keys, then statuses, then timers) and what each must give. Only what a
 * case states under `expect` is compared, so the schema keeps every expectation optional and
 * the runner (testing.ts) refuses a case that states none.
 *
 * @example
 * FlowTestFile.parse({ cases: [{ name: 'confirms', keys: [1], expect: { outcome: 'confirmed' } }] });
 */
import { z } from 'zod';
import { CALLER_INPUTS } from './executor.ts';
import { NO_RESPONSE_TIMER } from './machine-config.ts';
import { CallMessageStatus, Duration, EndpointName, OutcomeName, SEND_TYPES } from './schema.ts';

const KEY_MESSAGE = 'a key is 0-9, *, # or timeout (silence)';

/** What the caller does at a menu: a key (a number 0-9 is read as that key) or silence. */
export const TestKey = z
  .union(
    [
      z.enum(CALLER_INPUTS as unknown as [string, ...string[]], { error: KEY_MESSAGE }),
      z
        .number({ error: KEY_MESSAGE })
        .int({ error: KEY_MESSAGE })
        .min(0, { error: KEY_MESSAGE })
        .max(9, {
          error: KEY_MESSAGE,
        }),
    ],
    { error: KEY_MESSAGE },
  )
  .meta({
    id: 'TestKey',
    description: 'A key ("0"-"9", "*", "#"; 0-9 may be written as numbers) or timeout (silence).',
  });
export type TestKey = z.infer<typeof TestKey>;

/** A var of the flow; null takes away a default given at the top of the file. */
const TestVars = z
  .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
  .meta({
    id: 'TestVars',
    description:
      "The flow's params. A case's vars are merged over the file's; null removes a file default.",
  });

/** `node:key`, with the caller's input on a wrong step: `main/r1:wrong(timeout)`, `main:wrong(7)`. */
export const PATH_STEP_PATTERN = /^([^:\s]+):([0-9*#]|wrong)(?:\(([0-9*#]|timeout)\))?$/;

export const TestPathStep = z
  .union([
    z.string().regex(PATH_STEP_PATTERN, {
      error:
        'a path step is node:key, like main:1, or a wrong step with its input, like main/r1:wrong(timeout)',
    }),
    z.strictObject({
      node: z.string().min(1),
      key: z.string().regex(/^([0-9*#]|wrong)$/, 'a step key is 0-9, *, # or wrong'),
      input: z
        .string()
        .regex(/^([0-9*#]|timeout)$/, 'an input is 0-9, *, # or timeout')
        .optional()
        .meta({ description: 'On a wrong step: silence (timeout) or the unhandled key.' }),
    }),
  ])
  .meta({
    id: 'TestPathStep',
    description:
      'A step of the path: the node and the key whose actions ran (wrong for silence or an unhandled key). `main:wrong` matches either input; `main:wrong(timeout)` only silence.',
    examples: ['main:1', 'main/r1:wrong(timeout)'],
  });
export type TestPathStep = z.infer<typeof TestPathStep>;

const RenderedFallback = z.strictObject({
  type: z.enum(SEND_TYPES).optional(),
  text: z.string().optional(),
  from: z.string().optional(),
  to: z.string().optional(),
  messageData: z.record(z.string(), z.unknown()).optional(),
});

export const TestSend = z
  .strictObject({
    id: z
      .string()
      .optional()
      .meta({ description: 'The follow-up id: <node>:<key>:<index>, or on:<status>:<index>.' }),
    type: z.enum(SEND_TYPES).optional(),
    text: z.string().optional().meta({ description: 'The text as sent: templates filled in.' }),
    from: z.string().optional(),
    to: z.string().optional(),
    ttl: z.number().optional(),
    messageData: z.record(z.string(), z.unknown()).optional(),
    fallbacks: z
      .array(RenderedFallback)
      .optional()
      .meta({ description: 'Every fallback, in order; each compared on the fields it states.' }),
  })
  .meta({
    id: 'TestSend',
    description: 'A follow-up message as rendered; only the fields given are compared.',
  });
export type TestSend = z.infer<typeof TestSend>;

export const TestWebhook = z
  .union([
    z.string().min(1),
    z.strictObject({
      url: z.string().min(1),
      body: z.record(z.string(), z.unknown()).optional(),
      headers: z.record(z.string(), z.string()).optional(),
    }),
  ])
  .meta({
    id: 'TestWebhook',
    description: 'A webhook the provider calls: its URL, or the URL with body and headers.',
  });
export type TestWebhook = z.infer<typeof TestWebhook>;

export const TestNotify = z
  .union([
    EndpointName,
    z.strictObject({
      endpoint: EndpointName,
      node: z
        .string()
        .nullable()
        .optional()
        .meta({ description: 'The node whose key ran it; null for an on: reaction.' }),
      data: z.record(z.string(), z.unknown()).optional(),
    }),
  ])
  .meta({
    id: 'TestNotify',
    description: 'A notify action run: the endpoint, or the endpoint with node and data.',
  });
export type TestNotify = z.infer<typeof TestNotify>;

const TIMER_PATTERN = /^(start|cancel) ([A-Za-z]+)$/;

export const TestTimer = z
  .union([
    z.string().regex(TIMER_PATTERN, {
      error: 'a timer effect is "start <timer>" or "cancel <timer>", like start noResponse',
    }),
    z.strictObject({ start: z.string(), after: Duration.optional() }),
    z.strictObject({ cancel: z.string() }),
  ])
  .meta({
    id: 'TestTimer',
    description:
      'A timer the machine starts or cancels, in order: "start noResponse", "cancel noResponse", or { start: noResponse, after: 30m }.',
  });
export type TestTimer = z.infer<typeof TestTimer>;

export const TestExpect = z
  .strictObject({
    path: z.array(TestPathStep).optional().meta({ description: 'Every step, compared exactly.' }),
    outcome: OutcomeName.nullable()
      .optional()
      .meta({ description: 'The outcome after keys, statuses and timers; null for none.' }),
    sends: z
      .array(TestSend)
      .optional()
      .meta({ description: 'Every follow-up, in order (keys first, then reactions).' }),
    webhooks: z
      .array(TestWebhook)
      .optional()
      .meta({ description: 'Every webhook the provider calls itself, in order.' }),
    notifies: z
      .array(TestNotify)
      .optional()
      .meta({ description: 'Every notify action run, in order (keys first, then reactions).' }),
    timers: z
      .array(TestTimer)
      .optional()
      .meta({ description: 'Every timer started or cancelled, in order.' }),
    ended: z.boolean().optional().meta({ description: 'Whether the menu hung up.' }),
    waitingAt: z
      .string()
      .nullable()
      .optional()
      .meta({ description: 'The node still waiting for a key; null once the call ended.' }),
  })
  .meta({
    id: 'TestExpect',
    description: 'What the call must give. Only what is stated is compared; state at least one.',
  });
export type TestExpect = z.infer<typeof TestExpect>;

export const TestCase = z
  .strictObject({
    name: z.string().min(1).meta({ description: 'Unique within the file.' }),
    description: z.string().optional(),
    vars: TestVars.optional(),
    lang: z.string().optional().meta({ description: "Prompt language; default: the file's." }),
    to: z.string().optional().meta({ description: 'The callee, the default recipient of sends.' }),
    from: z.string().optional().meta({ description: "The call's sender." }),
    keys: z.array(TestKey).optional().meta({ description: 'What the caller does, in order.' }),
    status: z
      .array(CallMessageStatus)
      .optional()
      .meta({ description: "Statuses of the call's message, fed after the keys." }),
    timers: z
      .array(z.enum([NO_RESPONSE_TIMER]))
      .optional()
      .meta({ description: 'Timers fired after the statuses.' }),
    expect: TestExpect,
  })
  .meta({ id: 'TestCase' });
export type TestCase = z.infer<typeof TestCase>;

export const FlowTestFile = z
  .strictObject({
    $schema: z.string().optional(),
    flow: z
      .string()
      .optional()
      .meta({ description: 'The flow tested; default: the file name without .test.yaml.' }),
    description: z.string().optional(),
    vars: TestVars.optional(),
    lang: z
      .string()
      .optional()
      .meta({ description: "Every case's prompt language; default: the flow's first." }),
    to: z.string().optional().meta({ description: "Every case's callee." }),
    from: z.string().optional().meta({ description: "Every case's sender." }),
    cases: z.array(TestCase).min(1, 'a test file needs at least one case'),
  })
  .meta({
    title: 'Switchboard flow tests',
    description:
      'Calls played through a flow (its machine and its provider menu) and what each must give.',
  });
export type FlowTestFile = z.infer<typeof FlowTestFile>;

/**
 * The JSON Schema of flow test files, for editors (`flows/test.schema.json`).
 *
 * @example
 * writeFileSync('flows/test.schema.json', JSON.stringify(flowTestJsonSchema(), null, 2));
 */
export function flowTestJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(FlowTestFile, { target: 'draft-2020-12', io: 'input' }) as Record<
    string,
    unknown
  >;
}
