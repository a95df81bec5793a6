/**
 * DELETE /v1/subjects/{phone}: forget a person on request (privacy/erasure.ts). The answer
 * says how much of each kind was removed; the log line that records the erasure carries the
 * number masked, like every other.
 */
import { createRoute, z } from '@hono/zod-openapi';
import { ErrorBody } from '../../messages/views.ts';
import { type ErasureDeps, ErasureReport, eraseSubject } from '../../privacy/erasure.ts';
import { isE164 } from '../../provider/message.ts';
import { errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: ErrorBody } },
});

const PhoneParam = z.object({
  phone: z
    .string()
    .refine(isE164, 'must be a valid phone number in E.164, such as +380501234567')
    .meta({
      param: { name: 'phone', in: 'path' },
      description: 'the person\'s number, E.164 (the "+" may be sent as %2B)',
      example: '+380501234567',
    }),
});

const erase = createRoute({
  method: 'delete',
  path: '/v1/subjects/{phone}',
  operationId: 'eraseSubject',
  tags: ['privacy'],
  security: needs('admin'),
  // erasing a number nothing is held about reports zeros
  ...errorCodes({ never: ['NOT_FOUND'] }),
  summary: 'Erase everything held about one phone number',
  description:
    'Removes every message to the number (with its timeline and outbox row), every call to it (path, events, timers, follow-up messages), the Viber messages it sent, the delivery events waiting for its messages, and the raw callback bodies about it, wherever they write the number in any form (with or without +, 00 or a national trunk 0; with spaces, dashes, dots, brackets or slashes; URL-encoded; as a JSON number); bodies that also carry other people are kept with the number and its message ids cut out. With the built-in sandbox, its own copies (messages, calls, callbacks, incoming messages, scripts) are forgotten too. Aggregate flow statistics stay. Callbacks that arrive later about the erased messages are acknowledged and dropped. Erasing again reports zeros.',
  request: { params: PhoneParam },
  responses: {
    200: {
      description: 'erased: how many of each kind',
      content: { 'application/json': { schema: ErasureReport } },
    },
    400: errorResponse('not an E.164 number'),
    401: errorResponse('API_TOKEN is set and the request does not carry it'),
  },
});

export function subjectRoutes(deps: ErasureDeps) {
  const app = newRouter();
  app.openapi(erase, async (c) => {
    const report = await eraseSubject(deps, c.req.valid('param').phone);
    c.get('logger')?.info({ subject: report.phone, removed: report.removed }, 'subject erased');
    // the counts only: the number itself stays out of the audit log
    c.set('audit', {
      removed: Object.fromEntries(
        Object.entries(report.removed).map(([kind, count]) => [kind, { count }]),
      ),
    });
    return c.json(report, 200);
  });
  return app;
}
