/**
 * The control API under `/_control`: what tests and the UI use to script the sandbox and to
 * see what it did. No rate limit: it is not part of the provider, so it answers alike in both
 * dialects (errors in the compact body), except where it shows what the provider reports:
 * `reported` in message listings and the body of an incoming Viber message. Who may use it is
 * the sandbox's rule (access.ts: this host, or SANDBOX_TOKEN); on top of that it takes JSON
 * bodies only and no request from another site (`controlRequests`), and it never shows a
 * secret: credentials and secret headers of callbacks are listed as `[redacted]`.
 * See src/sandbox/README.md for every endpoint.
 */
import { randomUUID } from 'node:crypto';
import { Hono } from 'hono';
import { z } from 'zod';
import { redactHeaders } from '../../http/secret-headers.ts';
import { REDACTED } from '../../logger.ts';
import { isE164, Recipient } from '../../provider/message.ts';
import { controlRequests } from '../access.ts';
import { CallbackKind, CallbackOptions, type CallbackRecord } from '../callbacks.ts';
import { CascadeChannel } from '../cascade.ts';
import type { SandboxContext } from '../context.ts';
import { docsInboundBody } from '../dialect.ts';
import { eraseFromSandbox } from '../erase.ts';
import { parseBody, providerError } from '../http.ts';
import { LifecycleTimings, type SandboxMessage } from '../messages.ts';
import { Script } from '../scripts.ts';
import { ScriptKey } from '../speechcall.ts';
import { docsStatusRecord, statusRecord } from './messaging.ts';

const Scripts = z.union([
  Script,
  z.array(Script).min(1),
  z.strictObject({ scripts: z.array(Script).min(1) }),
]);
const OptionsPatch = CallbackOptions.partial().strict().extend({
  timings: LifecycleTimings.partial().strict().optional(),
});
const InboundRequest = z.strictObject({
  from: Recipient,
  text: z.string().min(1, 'text is required'),
  /** The business account the user wrote to; default "Sandbox". */
  to: z.string().min(1).optional(),
});
const Reachable = z.strictObject({
  recipient: z.string().min(1),
  channels: z.array(CascadeChannel),
});
const PressKeys = z.strictObject({ keys: z.array(ScriptKey).min(1).max(100) });
const Advance = z.strictObject({ ms: z.number().int().nonnegative() });
const FaultRequest = z.strictObject({
  path: z.string().min(1),
  status: z.union([z.literal(500), z.literal(502), z.literal(503), z.literal(504)]).default(500),
  count: z.number().int().positive().default(1),
});

/** A callback as listings show it: its secret headers (X-Callback-Token, ...) redacted. */
const listed = (r: CallbackRecord) => ({ ...r, headers: redactHeaders(r.headers) });

export function controlRoutes(ctx: SandboxContext): Hono {
  const app = new Hono();
  app.use('*', controlRequests());

  /**
   * A message as the control API shows it: the sandbox's full record (fallbacks with their
   * own ids and statuses, history, error) in both dialects; in the docs one, `reported` is
   * what GET /bat/message/{id} answers for it (null for a fallback, which has no record).
   */
  const view = (m: SandboxMessage) => {
    const record = statusRecord(m, ctx.messages.get, ctx.dialect);
    if (ctx.dialect === 'compact') return record;
    return {
      ...record,
      reported: m.parentMessageId === undefined ? docsStatusRecord(m, ctx.messages.get) : null,
    };
  };

  app.get('/', (c) =>
    c.json({
      dialect: ctx.dialect,
      // which exist, not what they are: anyone reading this could play Switchboard's provider
      credentials: { login: ctx.credentials.login, password: REDACTED, apiKey: REDACTED },
      callbackUrl: ctx.callbackUrl ?? null,
      viberCallbackUrl: ctx.viberCallbackUrl ?? null,
      clock: { now: new Date(ctx.clock.now()).toISOString(), manual: ctx.clock.manual },
      options: ctx.options.get(),
      timings: ctx.timings.get(),
      counts: {
        messages: ctx.messages.list().length,
        calls: ctx.messages.calls().length,
        callbacks: ctx.sender.list().length,
        cascade: ctx.cascade.list().length,
        botUsers: ctx.bots.users().length,
        operators: ctx.chat.operators().length,
        inbound: ctx.inbound.list().length,
        scripts: ctx.scripts.list().length,
      },
    }),
  );

  app.post('/reset', (c) => {
    ctx.reset();
    return c.json({ reset: true });
  });

  app.get('/options', (c) => c.json({ ...ctx.options.get(), timings: ctx.timings.get() }));
  app.post('/options', async (c) => {
    const body = await parseBody(c, OptionsPatch);
    if (!body.ok) return body.response;
    const { timings, ...options } = body.value;
    const next = ctx.options.set(options);
    const nextTimings = timings === undefined ? ctx.timings.get() : ctx.timings.set(timings);
    return c.json({ ...next, timings: nextTimings });
  });

  app.get('/scripts', (c) => c.json(ctx.scripts.list()));
  app.post('/scripts', async (c) => {
    const body = await parseBody(c, Scripts);
    if (!body.ok) return body.response;
    const list = Array.isArray(body.value)
      ? body.value
      : 'scripts' in body.value
        ? body.value.scripts
        : [body.value];
    for (const script of list) ctx.scripts.add(script);
    return c.json({ queued: list.length, scripts: ctx.scripts.list() }, 201);
  });
  app.delete('/scripts', (c) => {
    ctx.scripts.clear(c.req.query('to'));
    return c.json({ scripts: ctx.scripts.list() });
  });

  app.get('/messages', (c) => {
    const q = c.req.query();
    const list = ctx.messages.list({
      ...(q.to !== undefined && { to: q.to }),
      ...(q.customerMessageId !== undefined && { customerMessageId: q.customerMessageId }),
      ...(q.type !== undefined && { type: q.type }),
      ...(q.status !== undefined && { status: q.status }),
    });
    return c.json(list.map(view));
  });
  app.get('/messages/:id', (c) => {
    const m = ctx.messages.get(c.req.param('id'));
    if (m === undefined) return providerError(c, 404, 'NOT_FOUND', 'no such message');
    return c.json(view(m));
  });

  // forgets one person (erase.ts); the number in E.164, its "+" sent as %2B or as is
  app.delete('/subjects/:phone', (c) => {
    const phone = c.req.param('phone');
    if (!isE164(phone)) {
      return providerError(c, 400, 'BAD_REQUEST', 'phone must be E.164, such as +380501234567', [
        {
          path: 'phone',
          code: 'INVALID_RECIPIENT',
          message: 'must be E.164, such as +380501234567',
        },
      ]);
    }
    return c.json({ phone, removed: eraseFromSandbox(ctx, phone) });
  });

  app.get('/calls', (c) => {
    const to = c.req.query('to');
    return c.json(ctx.messages.calls().filter((call) => to === undefined || call.to === to));
  });

  app.post('/calls/:ref/keys', async (c) => {
    const body = await parseBody(c, PressKeys);
    if (!body.ok) return body.response;
    const pressed = ctx.messages.pressKeys(c.req.param('ref'), body.value.keys);
    if (pressed.ok) return c.json({ pressed: body.value.keys, call: pressed.call }, 202);
    switch (pressed.reason) {
      case 'not-found':
        return providerError(
          c,
          404,
          'NOT_FOUND',
          'no speech call with this messageId or customerMessageId',
        );
      case 'not-live':
        return providerError(
          c,
          409,
          'NOT_LIVE',
          'this call plays scripted keys; script the number with "live": true to press keys on its next call',
        );
      case 'ended':
        return providerError(c, 409, 'CALL_ENDED', 'the call has ended (or was not answered)');
    }
  });

  app.get('/callbacks', (c) => {
    const kind = CallbackKind.safeParse(c.req.query('kind'));
    const messageId = c.req.query('messageId');
    return c.json(
      ctx.sender
        .list()
        .filter(
          (r) =>
            (!kind.success || r.kind === kind.data) &&
            (messageId === undefined || r.messageId === messageId),
        )
        .map(listed),
    );
  });

  app.post('/viber/inbound', async (c) => {
    const body = await parseBody(c, InboundRequest);
    if (!body.ok) return body.response;
    const url = ctx.viberCallbackUrl;
    if (url === undefined) {
      return providerError(c, 409, 'NO_CALLBACK_URL', 'no Viber callback URL is configured');
    }
    const message = {
      messageId: randomUUID(),
      from: body.value.from,
      to: body.value.to ?? 'Sandbox',
      text: body.value.text,
      timestamp: new Date(ctx.clock.now()).toISOString(),
    };
    const before = ctx.sender.list().length;
    await ctx.sender.send({
      kind: 'viber',
      url,
      body:
        ctx.dialect === 'docs'
          ? docsInboundBody(message)
          : { type: 'viber', channel: 'viber', ...message },
      headers: ctx.callbackHeaders,
    });
    const callback = ctx.sender.list()[before];
    const record = { ...message, ...(callback !== undefined && { callbackId: callback.id }) };
    ctx.inbound.add(record);
    return c.json({ ...record, callback: callback === undefined ? null : listed(callback) }, 202);
  });
  app.get('/viber/inbound', (c) => c.json(ctx.inbound.list()));

  app.get('/cascade', (c) => c.json(ctx.cascade.list()));
  app.get('/cascade/reachable', (c) => {
    const recipient = c.req.query('recipient');
    if (recipient === undefined) {
      return providerError(c, 400, 'BAD_REQUEST', 'query recipient is required');
    }
    return c.json({ recipient, channels: ctx.cascade.reachable(recipient) });
  });
  app.post('/cascade/reachable', async (c) => {
    const body = await parseBody(c, Reachable);
    if (!body.ok) return body.response;
    ctx.cascade.setReachable(body.value.recipient, body.value.channels);
    return c.json({
      recipient: body.value.recipient,
      channels: ctx.cascade.reachable(body.value.recipient),
    });
  });

  app.get('/faults', (c) => c.json(ctx.faults.list()));
  app.post('/faults', async (c) => {
    const body = await parseBody(c, FaultRequest);
    if (!body.ok) return body.response;
    ctx.faults.add(body.value);
    return c.json(ctx.faults.list(), 201);
  });
  app.delete('/faults', (c) => {
    ctx.faults.clear();
    return c.json([]);
  });

  app.get('/bots', (c) => c.json(ctx.bots.users()));
  app.get('/chat/operators', (c) => c.json(ctx.chat.operators()));

  app.get('/clock', (c) =>
    c.json({ now: new Date(ctx.clock.now()).toISOString(), manual: ctx.clock.manual }),
  );
  app.post('/clock/advance', async (c) => {
    const clock = ctx.manualClock;
    if (clock === undefined) {
      return providerError(
        c,
        409,
        'REAL_CLOCK',
        'this sandbox runs on the real clock; create it with a manual clock to advance time',
      );
    }
    const body = await parseBody(c, Advance);
    if (!body.ok) return body.response;
    await clock.advance(body.value.ms);
    return c.json({ now: new Date(clock.now()).toISOString(), manual: true });
  });

  return app;
}
