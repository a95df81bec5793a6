/**
 * The provider's chat operator API (company and operator tokens, token validation,
 * operators and their statuses), served under `/chat`: {chat_url} is the
 * sandbox's base URL plus `/chat`. Management endpoints need a company token (Bearer, or
 * X-Authorization-Key); an operator token there is 403, a missing or bad token 401.
 */
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { z } from 'zod';
import { OperatorStatus } from '../../provider/chat.ts';
import type { ChatFailure } from '../chat.ts';
import type { SandboxContext } from '../context.ts';
import { parseBody, providerError, rateLimit } from '../http.ts';

const CompanyTokenRequest = z.object({ login: z.string(), password: z.string() });
const OperatorTokenRequest = z.object({ id: z.number().int(), expiresAt: z.string() });
const ValidateTokenRequest = z.object({ token: z.string() });
const SynchronizeRequest = z
  .array(z.object({ organizationId: z.number().int(), name: z.string().trim().min(1) }))
  .min(1, 'at least one operator');
const StatusRequest = z.object({
  id: z.number().int(),
  status: z
    .number()
    .int()
    .refine((v) => OperatorStatus.safeParse(v).success, {
      message: 'status must be 0 (Active), 1 (Inactive) or 2 (Deleted)',
    })
    .transform((v) => v as OperatorStatus),
});

function failure(c: Context, f: ChatFailure): Response {
  return providerError(c, f.status, f.error, f.message);
}

/** The token as sent: `Authorization: Bearer <t>`, or `X-Authorization-Key: <t>`. */
function sentToken(c: Context): string | undefined {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
  return bearer?.[1] ?? c.req.header('x-authorization-key');
}

export function chatRoutes(ctx: SandboxContext): Hono {
  const app = new Hono();
  app.use(
    '*',
    rateLimit(() => ctx.buckets().chat, 'chat: 100 requests/s, burst 150'),
  );

  const company: MiddlewareHandler = async (c, next) => {
    const result = await ctx.chat.requireCompany(sentToken(c));
    if (!result.ok) return failure(c, result);
    await next();
  };

  app.post('/api/company/get-token', async (c) => {
    const body = await parseBody(c, CompanyTokenRequest);
    if (!body.ok) return body.response;
    const token = await ctx.chat.companyToken(body.value.login, body.value.password);
    return token.ok ? c.json(token.value) : failure(c, token);
  });

  app.get('/api/company/organization', company, (c) => c.json(ctx.chat.organizations()));

  app.post('/api/operator/get-token', company, async (c) => {
    const body = await parseBody(c, OperatorTokenRequest);
    if (!body.ok) return body.response;
    const token = await ctx.chat.operatorToken(body.value.id, body.value.expiresAt);
    return token.ok ? c.json(token.value) : failure(c, token);
  });

  app.post('/api/operator/validate-token', company, async (c) => {
    const body = await parseBody(c, ValidateTokenRequest);
    if (!body.ok) return body.response;
    return c.json(await ctx.chat.validateToken(body.value.token));
  });

  app.get('/api/operator', company, (c) => {
    const accept = c.req.header('accept') ?? '';
    if (!/\btext\/plain\b/i.test(accept)) {
      return providerError(
        c,
        400,
        'BAD_REQUEST',
        `this endpoint requires the header Accept: text/plain (got ${accept === '' ? 'none' : `"${accept}"`})`,
      );
    }
    const raw = c.req.query('organizationId');
    if (raw === undefined || !/^\d+$/.test(raw)) {
      return providerError(c, 400, 'BAD_REQUEST', 'query organizationId (an integer) is required', [
        { path: 'organizationId', code: 'REQUIRED', message: 'an integer is required' },
      ]);
    }
    const list = ctx.chat.listOperators(Number(raw));
    return list.ok ? c.json(list.value) : failure(c, list);
  });

  app.post('/api/operator/synchronize', company, async (c) => {
    const body = await parseBody(c, SynchronizeRequest, { requireJsonType: true });
    if (!body.ok) return body.response;
    const created = ctx.chat.synchronize(body.value);
    return created.ok ? c.json(created.value) : failure(c, created);
  });

  app.post('/api/operator/status', company, async (c) => {
    const body = await parseBody(c, StatusRequest);
    if (!body.ok) return body.response;
    const moved = ctx.chat.setStatus(body.value.id, body.value.status);
    return moved.ok ? c.body(null, 200) : failure(c, moved);
  });

  return app;
}
