/**
 * A call prepared before anything is stored: its flow, vars and language checked, its menu
 * rendered with signed tokens, its speechcall message validated, its first snapshot taken.
 */
import { AppError, type ErrorCode, type ErrorDetail } from '../errors.ts';
import {
  type CompiledFlow,
  type LoadedFlow,
  nodeTokenSigner,
  persistFlowSnapshot,
  renderMenu,
  startFlow,
  validateVars,
} from '../flows/index.ts';
import { uuidv7 } from '../ids.ts';
import { prepareMessages } from '../messages/submit.ts';
import { parseSpeechMenuFast } from '../provider/menu.ts';
import type { PlannedPrompt } from '../speech/spoken.ts';
import type { StartDeps } from './deps.ts';

export type Rejection = { code: ErrorCode; message: string; details: ErrorDetail[] };

// Stands in for a call's menu while the provider models check the rest of its message.
const STAND_IN_MENU = [{ introUrl: 'menu', dtmfActions: { wrong: [{ action: 'hangup' }] } }];

/**
 * The speechcall message of a call, validated like any message (`prepareMessages`), except
 * that a menu `parseSpeechMenuFast` accepts is not walked by the schemas: the models check
 * the message with a one-item menu standing in, and the stored payload gets the call's own.
 * Zod's walk and copy of the appointment reminder's menu were ~150 KB of the ~350 KB a
 * started call allocated. A menu the hand check refuses goes through the schemas itself,
 * which name the problem.
 */
export function prepareCallMessage(
  message: { from: string; to: string; menu: unknown; customerMessageId: string },
  callId: string,
  now: Date,
): ReturnType<typeof prepareMessages> {
  const menu = parseSpeechMenuFast(message.menu);
  const out = prepareMessages(
    [callMessage({ ...message, menu: menu ? STAND_IN_MENU : message.menu })],
    { callId, role: 'call' },
    now,
  );
  const p = out.prepared[0];
  if (menu && p) p.row.payload = { ...(p.row.payload as Record<string, unknown>), menu };
  return out;
}

/** `prepareCallMessage` by the schemas alone (exported for the test that compares). */
export function prepareCallMessageWithSchemas(
  message: { from: string; to: string; menu: unknown; customerMessageId: string },
  callId: string,
  now: Date,
): ReturnType<typeof prepareMessages> {
  return prepareMessages([callMessage(message)], { callId, role: 'call' }, now);
}

function callMessage(m: { from: string; to: string; menu: unknown; customerMessageId: string }) {
  const { from, to, menu, customerMessageId } = m;
  return { from, to, type: 'speechcall', text: 'ivr', menu, customerMessageId };
}

/** Prepares one call, or says why it cannot start (paths relative to `prefix`). */
export function prepareCall(
  deps: StartDeps,
  compiled: CompiledFlow,
  input: {
    to: string;
    from: string;
    vars?: Record<string, unknown> | undefined;
    lang?: string | undefined;
  },
  prefix: string,
  now: Date,
) {
  const at = (p: string) => (prefix ? `${prefix}.${p}` : p);
  const details: ErrorDetail[] = [];
  const vars = validateVars(compiled, input.vars ?? {});
  if (!vars.ok) details.push(...vars.details.map((d) => ({ ...d, path: at(d.path) })));
  const lang = input.lang ?? compiled.languages[0]!;
  if (!compiled.languages.includes(lang)) {
    details.push({
      path: at('lang'),
      code: 'UNKNOWN_LANGUAGE',
      message: `must be one of the flow's languages: ${compiled.languages.join(', ')}`,
    });
  }
  if (!vars.ok || details.length > 0) {
    return {
      error: {
        // a language the flow does not speak has its own code; bad vars name both
        code: vars.ok ? ('INVALID_LANGUAGE' as const) : ('INVALID_VARS' as const),
        message: details[0] ? `${details[0].path}: ${details[0].message}` : 'invalid call',
        details,
      },
    };
  }
  const id = uuidv7(now.getTime());
  // `say:` prompts: their URLs now, their audio just before the call is dispatched
  const spoken: PlannedPrompt[] = [];
  const say = deps.spoken;
  let menu: ReturnType<typeof renderMenu>;
  try {
    menu = renderMenu(compiled, {
      vars: vars.vars,
      lang,
      hookUrl: deps.hookUrl,
      tokenFor: nodeTokenSigner(id, deps.signingSecret),
      ...(say && {
        say: (prompt) => {
          const planned = say.plan(prompt, lang, vars.vars);
          // a prompt without params is the flow's, stored when it loaded
          if (prompt.say.includes('{{')) spoken.push(planned);
          return planned.url;
        },
      }),
    });
  } catch (err) {
    // a prompt with nothing left to say once the vars are filled in
    if (!(err instanceof AppError)) throw err;
    const details = err.details.map((d) => ({ ...d, path: at(d.path) }));
    return { error: { code: err.code, message: err.message, details } };
  }
  const customerMessageId = `call:${id}`;
  // the provider models check the number, the sender and the rendered menu
  const { results, prepared } = prepareCallMessage(
    { from: input.from, to: input.to, menu, customerMessageId },
    id,
    now,
  );
  const rejected = results[0];
  if (rejected?.error) {
    const details = rejected.error.details.map((d) => ({
      ...d,
      path: at(d.path.replace(/^messages\[0\]\.?/, '')),
    }));
    // the message names the field as the details do (`calls[3].to` in a batch)
    const first = details[0];
    const message = first ? `${first.path}: ${first.message}` : rejected.error.message;
    return { error: { code: rejected.error.code as ErrorCode, message, details } };
  }
  const machine = deps.flows.machineFor(compiled);
  const started = startFlow(machine, { vars: vars.vars, lang, to: input.to, from: input.from });
  return {
    call: {
      id,
      lang,
      vars: vars.vars,
      message: prepared[0]!,
      customerMessageId,
      // the stored form: xstate's snapshot object is several times its size
      snapshot: persistFlowSnapshot(started.snapshot),
      effects: started.effects,
      // the call's own spoken prompts (with its details), stored with it
      prompts: say && spoken.length > 0 ? say.rowsFor(spoken, id, now) : [],
    },
  };
}

export type PreparedCall = NonNullable<ReturnType<typeof prepareCall>['call']>;

/** The flow as loaded, with its compiled form and source, or why it cannot start calls. */
export async function startableFlow(
  deps: Pick<StartDeps, 'flows'>,
  flowId: string,
  path: string,
): Promise<LoadedFlow & { compiled: CompiledFlow }> {
  const flow = await deps.flows.get(flowId);
  if (!flow) {
    throw new AppError('UNKNOWN_FLOW', `no flow "${flowId}" in the flows directory`, [
      { path, code: 'UNKNOWN_FLOW', message: `unknown flow "${flowId}"` },
    ]);
  }
  if (!flow.compiled) {
    throw new AppError('INVALID_FLOW', `flow "${flowId}" has errors and cannot start calls`, [
      ...flow.errors.map((e) => ({
        path,
        code: e.rule,
        message: `${e.file}:${e.line}:${e.column} ${e.message}`,
      })),
    ]);
  }
  return { ...flow, compiled: flow.compiled };
}
