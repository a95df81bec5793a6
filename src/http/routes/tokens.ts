/**
 * /v1/tokens: API tokens with scopes (src/http/api-tokens.ts). Making one answers the token
 * itself, once; listing never shows it (nor its hash); revoking keeps the row, with when. A
 * token can only give scopes it has itself, so an `admin` token cannot make a `send` one.
 */
import { createRoute, z } from '@hono/zod-openapi';
import { AppError } from '../../errors.ts';
import { CreatedToken, TokenName, TokenScopes, type TokenStore, TokenView } from '../api-tokens.ts';
import { auditItems } from '../audit.ts';
import { errorBody, errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { allows, effectiveScopes, needs } from '../scopes.ts';

const create = createRoute({
  method: 'post',
  path: '/v1/tokens',
  operationId: 'createToken',
  tags: ['tokens'],
  summary: 'Make an API token with scopes; the answer holds the token, shown this once',
  security: needs('admin'),
  ...errorCodes({ also: ['CONFLICT'] }),
  request: {
    body: {
      required: true,
      content: {
        'application/json': {
          schema: z
            .object({ name: TokenName, scopes: TokenScopes })
            .meta({ id: 'CreateApiToken', example: { name: 'ci-deploy', scopes: ['send'] } }),
        },
      },
    },
  },
  responses: {
    201: { description: 'made', content: { 'application/json': { schema: CreatedToken } } },
    400: errorBody('bad name or scopes'),
    403: errorBody('a scope the calling token does not have itself'),
    409: errorBody('a token not revoked has that name'),
  },
});

const list = createRoute({
  method: 'get',
  path: '/v1/tokens',
  operationId: 'listTokens',
  tags: ['tokens'],
  summary: 'Every API token made, newest first, revoked ones too (never the token itself)',
  security: needs('admin'),
  responses: {
    200: {
      description: 'the tokens',
      content: {
        'application/json': {
          schema: z.object({ items: z.array(TokenView) }).meta({ id: 'ApiTokenList' }),
        },
      },
    },
  },
});

const revoke = createRoute({
  method: 'delete',
  path: '/v1/tokens/{id}',
  operationId: 'revokeToken',
  tags: ['tokens'],
  summary: 'Revoke an API token (at once on this instance, within seconds on the others)',
  security: needs('admin'),
  request: {
    params: z.object({
      id: z
        .string()
        .max(64)
        .meta({ param: { name: 'id', in: 'path' }, example: 'tok_3kVx2mQ9aLr8' }),
    }),
  },
  responses: {
    200: {
      description: 'revoked (or already revoked: revokedAt says since when)',
      content: { 'application/json': { schema: TokenView } },
    },
    404: errorBody('no such token'),
  },
});

export function tokenRoutes(deps: { store: TokenStore }) {
  const app = newRouter();
  app.openapi(create, async (c) => {
    const { name, scopes } = c.req.valid('json');
    const caller = c.get('principal');
    const beyond = scopes.filter((s) => !allows(caller?.scopes ?? [], s));
    if (beyond.length > 0) {
      throw new AppError(
        'INSUFFICIENT_SCOPE',
        `a token can only give scopes it has: "${caller?.name}" has ${effectiveScopes(caller?.scopes ?? []).join(', ')}, not ${beyond.join(', ')}`,
        [{ path: 'scopes', code: 'INSUFFICIENT_SCOPE', message: `not held: ${beyond.join(', ')}` }],
      );
    }
    const made = await deps.store.create({ name, scopes, createdBy: caller?.name ?? 'open' });
    c.set('audit', { created: { tokens: auditItems([made.id], [made.name]) } });
    return c.json(made, 201);
  });
  app.openapi(list, async (c) => c.json({ items: await deps.store.list() }, 200));
  app.openapi(revoke, async (c) => {
    const { id } = c.req.valid('param');
    const result = await deps.store.revoke(id);
    if (!result) throw new AppError('NOT_FOUND', `no token "${id}"`);
    c.set('audit', {
      removed: {
        tokens: auditItems(
          result.revokedNow ? [id] : [],
          result.revokedNow ? [result.token.name] : [],
        ),
      },
    });
    return c.json(result.token, 200);
  });
  return app;
}
