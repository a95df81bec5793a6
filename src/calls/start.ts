/**
 * Starting calls: check the flow, the vars and the numbers, render the menu with signed
 * tokens, and store the call (pinned to its flow version), its speechcall message and the
 * outbox row in one transaction. The dispatcher sends it from there.
 *
 * @example
 * await startCall(deps, { flow: 'appointment-reminder', to: '+380501234567', from: 'Clinic', vars: { name: 'Ann', date: 'Monday' } });
 */
import { z } from 'zod';
import type { Db, Tx } from '../db/client.ts';
import { callEvents, calls, callTimers, flowVersions } from '../db/schema/index.ts';
import { AppError, type ErrorCode, type ErrorDetail } from '../errors.ts';
import {
  type CompiledFlow,
  nodeTokenSigner,
  persistFlowSnapshot,
  renderMenu,
  startFlow,
  type TokenSecret,
  validateVars,
} from '../flows/index.ts';
import { uuidv7 } from '../ids.ts';
import { prepareMessages, storeMessages } from '../messages/submit.ts';
import { parseSpeechMenuFast } from '../provider/menu.ts';
import type { FlowRegistry } from './registry.ts';
import { bumpStats, type RuntimeDeps, runStartEffects } from './runtime.ts';

export interface StartDeps extends RuntimeDeps {
  db: Db;
  flows: FlowRegistry;
  /** the newest secret signs every token of new calls */
  signingSecret: TokenSecret;
  /** where the provider posts key webhooks: `${PUBLIC_URL}/hooks/speechcall` */
  hookUrl: string;
}

export const StartCallRequest = z
  .object({
    flow: z.string().min(1).meta({ example: 'appointment-reminder' }),
    to: z.string().min(1).meta({ example: '+380501234567' }),
    from: z.string().min(1).meta({ example: 'Clinic' }),
    vars: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({ example: { name: 'Ann', date: 'Monday 10:00' } }),
    lang: z
      .string()
      .optional()
      .meta({ description: "one of the flow's languages; default its first", example: 'en' }),
  })
  .meta({ id: 'StartCallRequest' });
export type StartCallRequest = z.infer<typeof StartCallRequest>;

export const CallStarted = z
  .object({
    id: z.string(),
    flow: z.string(),
    flowVersion: z.string(),
    messageId: z.string(),
    customerMessageId: z.string(),
    state: z.literal('queued'),
  })
  .meta({ id: 'CallStarted' });
export type CallStarted = z.infer<typeof CallStarted>;

export const BatchCallsRequest = z
  .object({
    flow: z.string().min(1),
    from: z.string().min(1),
    lang: z.string().optional(),
    calls: z
      .array(
        z.object({
          to: z.string(),
          vars: z.record(z.string(), z.unknown()).optional(),
          lang: z.string().optional(),
        }),
      )
      .min(1)
      .max(10_000),
  })
  .meta({
    id: 'BatchCallsRequest',
    example: {
      flow: 'appointment-reminder',
      from: 'Clinic',
      calls: [{ to: '+380501234567', vars: { name: 'Ann', date: 'Monday 10:00' } }],
    },
  });
export type BatchCallsRequest = z.infer<typeof BatchCallsRequest>;

export const BatchItemResult = z
  .object({
    id: z.string().optional(),
    messageId: z.string().optional(),
    customerMessageId: z.string().optional(),
    status: z.enum(['queued', 'rejected']),
    error: z
      .object({
        code: z.string(),
        message: z.string(),
        details: z.array(z.object({ path: z.string(), code: z.string(), message: z.string() })),
      })
      .optional(),
  })
  .meta({ id: 'BatchCallResult' });
export type BatchItemResult = z.infer<typeof BatchItemResult>;

type Rejection = { code: ErrorCode; message: string; details: ErrorDetail[] };

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
function prepareCall(
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
      code: 'unknown_language',
      message: `must be one of the flow's languages: ${compiled.languages.join(', ')}`,
    });
  }
  if (!vars.ok || details.length > 0) {
    return {
      error: {
        code: 'INVALID_VARS' as const,
        message: details[0] ? `${details[0].path}: ${details[0].message}` : 'invalid call',
        details,
      },
    };
  }
  const id = uuidv7(now.getTime());
  const menu = renderMenu(compiled, {
    vars: vars.vars,
    lang,
    hookUrl: deps.hookUrl,
    tokenFor: nodeTokenSigner(id, deps.signingSecret),
  });
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
    return {
      error: { code: rejected.error.code as ErrorCode, message: rejected.error.message, details },
    };
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
    },
  };
}

async function compiledFlow(deps: StartDeps, flowId: string, path: string): Promise<CompiledFlow> {
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
  return flow.compiled;
}

async function pinVersion(tx: Tx, compiled: CompiledFlow): Promise<void> {
  await tx
    .insert(flowVersions)
    .values({ flowId: compiled.id, version: compiled.version, compiled })
    .onConflictDoNothing();
}

type Prepared = NonNullable<ReturnType<typeof prepareCall>['call']>;

/**
 * Stores prepared calls of one flow in a few set-based statements: their messages, events and
 * outbox rows, the call rows, and the first effects (the no-response timer).
 */
async function storeCalls(
  tx: Tx,
  deps: StartDeps,
  compiled: CompiledFlow,
  items: { p: Prepared; input: { to: string; from: string } }[],
  now: Date,
) {
  await storeMessages(
    tx,
    items.map((i) => i.p.message),
    now,
  );
  const rows = items.map(({ p, input }) => ({
    id: p.id,
    flowId: compiled.id,
    flowVersion: compiled.version,
    to: input.to,
    from: input.from,
    lang: p.lang,
    vars: p.vars,
    state: 'queued',
    outcome: null,
    snapshot: p.snapshot,
    messageId: p.message.row.id!,
    endedAt: null,
    createdAt: now,
    updatedAt: now,
  }));
  for (let i = 0; i < rows.length; i += 500) await tx.insert(calls).values(rows.slice(i, i + 500));
  // a new call's only effects are timers: written in bulk; anything else goes the long way
  const timers: (typeof callTimers.$inferInsert)[] = [];
  const events: (typeof callEvents.$inferInsert)[] = [];
  for (const [n, { p }] of items.entries()) {
    const other = p.effects.filter((e) => e.type !== 'startTimer');
    if (other.length > 0) await runStartEffects(tx, deps, { row: rows[n]!, compiled }, other);
    for (const e of p.effects) {
      if (e.type !== 'startTimer') continue;
      timers.push({ callId: p.id, timer: e.timer, fireAt: new Date(now.getTime() + e.afterMs) });
      events.push({
        callId: p.id,
        kind: 'timer-started',
        detail: { timer: e.timer, afterMs: e.afterMs },
        at: now,
      });
    }
  }
  for (let i = 0; i < timers.length; i += 1000) {
    await tx.insert(callTimers).values(timers.slice(i, i + 1000));
    await tx.insert(callEvents).values(events.slice(i, i + 1000));
  }
}

/** POST /v1/calls */
export async function startCall(deps: StartDeps, input: StartCallRequest): Promise<CallStarted> {
  const compiled = await compiledFlow(deps, input.flow, 'flow');
  const now = deps.clock.now();
  const prepared = prepareCall(deps, compiled, input, '', now);
  if (prepared.error)
    throw new AppError(prepared.error.code, prepared.error.message, prepared.error.details);
  const p = prepared.call!;
  await deps.db.transaction(async (tx) => {
    await pinVersion(tx, compiled);
    await storeCalls(tx, deps, compiled, [{ p, input }], now);
    await bumpStats(tx, compiled.id, [{ metric: 'started', subject: '' }]);
  });
  deps.onQueued?.();
  return {
    id: p.id,
    flow: compiled.id,
    flowVersion: compiled.version,
    messageId: p.message.row.id!,
    customerMessageId: p.customerMessageId,
    state: 'queued',
  };
}

// One transaction per chunk: a batch of 10 000 never holds one giant transaction open. A
// prepared call holds its rendered, validated menu (~25 KB of objects, 14 KB of JSON for the
// appointment reminder) until its chunk commits, and the insert serialises every payload
// again, so the chunk sets how much of a batch is in memory at once. 6000 calls in requests of
// 1000: with 500 the server's RSS peaked at ~400 MB (~50 MB live), with 50 at ~270 MB, for the
// same CPU within the noise (the statements per chunk are few and set-based).
const BATCH_CHUNK = 50;

/** POST /v1/calls/batch: per-item results in request order, like /v1/messages. */
export async function startCalls(
  deps: StartDeps,
  input: BatchCallsRequest,
): Promise<{ flow: string; flowVersion: string; calls: BatchItemResult[]; queued: number }> {
  const compiled = await compiledFlow(deps, input.flow, 'flow');
  const results: BatchItemResult[] = new Array(input.calls.length);
  let queued = 0;
  for (let start = 0; start < input.calls.length; start += BATCH_CHUNK) {
    const now = deps.clock.now();
    const chunk = input.calls.slice(start, start + BATCH_CHUNK);
    const ready: { index: number; p: Prepared; input: { to: string; from: string } }[] = [];
    chunk.forEach((item, i) => {
      const index = start + i;
      const callInput = {
        to: item.to,
        from: input.from,
        vars: item.vars,
        lang: item.lang ?? input.lang,
      };
      const prepared = prepareCall(deps, compiled, callInput, `calls[${index}]`, now);
      if (prepared.error)
        results[index] = { status: 'rejected', error: prepared.error as Rejection };
      else ready.push({ index, p: prepared.call!, input: callInput });
    });
    if (ready.length === 0) continue;
    await deps.db.transaction(async (tx) => {
      await pinVersion(tx, compiled);
      await storeCalls(tx, deps, compiled, ready, now);
      await bumpStats(
        tx,
        compiled.id,
        ready.map(() => ({ metric: 'started', subject: '' })),
      );
    });
    for (const r of ready) {
      results[r.index] = {
        id: r.p.id,
        messageId: r.p.message.row.id!,
        customerMessageId: r.p.customerMessageId,
        status: 'queued',
      };
    }
    queued += ready.length;
    deps.onQueued?.();
  }
  return { flow: compiled.id, flowVersion: compiled.version, calls: results, queued };
}
