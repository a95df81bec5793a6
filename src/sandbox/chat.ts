/**
 * The chat operator side of the sandbox, as the provider's chat operator API defines it:
 * company JWTs (from login and password) and operator JWTs (from a company token),
 * operators per organization (`{id, name, status, organization: {id, name}}`) and the
 * operator status table (0 Active, 1 Inactive, 2 Deleted).
 *
 * Tokens are HS256 JWTs signed with a secret made per sandbox (and again at each reset, so
 * a reset also voids old tokens). Expiry is judged on the sandbox clock, not the wall clock,
 * so a test can advance past an operator token's expiresAt.
 *
 * Status moves follow the provider's operator status table: Active to Inactive, Inactive to
 * Active, Active to Deleted. Deleted is final. Moving Inactive to Deleted is refused too (the
 * table only deletes an Active operator). Setting the status an operator already has (Active
 * or Inactive) is a no-op that succeeds, so a retried request does no harm.
 *
 * @example
 * const chat = createChatStore({ clock, credentials: DEFAULT_CREDENTIALS });
 * const token = await chat.companyToken('sandbox', 'sandbox'); // { ok: true, value: 'eyJ...' }
 */
import { randomBytes } from 'node:crypto';
import { sign, verify } from 'hono/jwt';
import { z } from 'zod';
import {
  MAX_OPERATOR_TOKEN_MS,
  OPERATOR_STATUS,
  type OperatorStatus,
  type Organization,
  type TokenValidation,
} from '../provider/chat.ts';
import { type SandboxCredentials, secretEquals } from './auth.ts';
import type { SandboxClock } from './clock.ts';

const STATUS_NAME = ['Active', 'Inactive', 'Deleted'] as const;

/** The provider's operator status table: from status -> statuses it may move to. */
export const OPERATOR_MOVES: Readonly<Record<OperatorStatus, readonly OperatorStatus[]>> = {
  0: [1, 2],
  1: [0],
  2: [],
};

export const DEFAULT_ORGANIZATIONS: readonly Organization[] = [
  { id: 1, name: 'Sandbox organization' },
  { id: 2, name: 'Sandbox second organization' },
];

/** The client id the sandbox's one company has. */
export const SANDBOX_CLIENT_ID = 1001;

/** An operator as the sandbox keeps it: always in one of its organizations. */
export interface SandboxOperator {
  id: number;
  name: string;
  status: OperatorStatus;
  organization: Organization;
}

export type ChatFailure = {
  ok: false;
  status: 400 | 401 | 403 | 404;
  error: string;
  message: string;
};
export type ChatResult<T> = { ok: true; value: T } | ChatFailure;

const fail = (status: ChatFailure['status'], error: string, message: string): ChatFailure => ({
  ok: false,
  status,
  error,
  message,
});

const TokenClaims = z.object({
  typ: z.enum(['company', 'operator']),
  clientId: z.number().int(),
  operatorId: z.number().int().optional(),
  exp: z.number().optional(),
});
type TokenClaims = z.infer<typeof TokenClaims>;

export interface ChatStore {
  companyToken(login: string, password: string): Promise<ChatResult<string>>;
  /** Checks a company token as sent (Bearer or X-Authorization-Key). */
  requireCompany(token: string | undefined): Promise<ChatResult<{ clientId: number }>>;
  operatorToken(operatorId: number, expiresAt: string): Promise<ChatResult<string>>;
  validateToken(token: string): Promise<TokenValidation>;
  organizations(): Organization[];
  listOperators(organizationId: number): ChatResult<SandboxOperator[]>;
  synchronize(
    items: readonly { organizationId: number; name: string }[],
  ): ChatResult<{ id: number; name: string; status: OperatorStatus }[]>;
  setStatus(id: number, status: OperatorStatus): ChatResult<SandboxOperator>;
  operators(): SandboxOperator[];
  reset(): void;
}

export interface ChatStoreDeps {
  clock: Pick<SandboxClock, 'now'>;
  credentials: SandboxCredentials;
  organizations?: readonly Organization[];
}

export function createChatStore(deps: ChatStoreDeps): ChatStore {
  const orgs = deps.organizations ?? DEFAULT_ORGANIZATIONS;
  let secret = randomBytes(32).toString('hex');
  let operators = new Map<number, SandboxOperator>();
  let nextOperatorId = 1;

  async function decode(token: string): Promise<ChatResult<TokenClaims>> {
    let payload: unknown;
    try {
      // exp and iat are checked against the sandbox clock below, not the wall clock.
      payload = await verify(token, secret, { alg: 'HS256', exp: false, iat: false, nbf: false });
    } catch {
      return fail(401, 'UNAUTHORIZED', 'the token is not a valid token of this service');
    }
    const claims = TokenClaims.safeParse(payload);
    if (!claims.success) return fail(401, 'UNAUTHORIZED', 'the token carries no known claims');
    if (claims.data.exp !== undefined && claims.data.exp * 1000 <= deps.clock.now()) {
      return fail(401, 'UNAUTHORIZED', 'the token has expired');
    }
    return { ok: true, value: claims.data };
  }

  return {
    async companyToken(login, password) {
      const good =
        secretEquals(login, deps.credentials.login) &&
        secretEquals(password, deps.credentials.password);
      if (!good) return fail(401, 'UNAUTHORIZED', 'login or password is not valid');
      const token = await sign(
        {
          typ: 'company',
          clientId: SANDBOX_CLIENT_ID,
          sub: login,
          iat: Math.floor(deps.clock.now() / 1000),
        },
        secret,
        'HS256',
      );
      return { ok: true, value: token };
    },

    async requireCompany(token) {
      if (token === undefined || token.trim() === '') {
        return fail(
          401,
          'UNAUTHORIZED',
          'a company token is required: Authorization: Bearer <token> or X-Authorization-Key',
        );
      }
      const claims = await decode(token.trim());
      if (!claims.ok) return claims;
      if (claims.value.typ !== 'company') {
        return fail(
          403,
          'FORBIDDEN',
          'an operator token cannot do this: organization management needs a company token',
        );
      }
      return { ok: true, value: { clientId: claims.value.clientId } };
    },

    async operatorToken(operatorId, expiresAt) {
      const operator = operators.get(operatorId);
      if (operator === undefined) {
        return fail(404, 'NOT_FOUND', `operator ${operatorId} does not exist`);
      }
      if (operator.status === OPERATOR_STATUS.deleted) {
        return fail(400, 'OPERATOR_DELETED', `operator ${operatorId} is Deleted`);
      }
      const at = Date.parse(expiresAt);
      const now = deps.clock.now();
      if (!/^\d{4}-\d{2}-\d{2}T/.test(expiresAt) || Number.isNaN(at)) {
        return fail(400, 'INVALID_EXPIRES_AT', 'expiresAt must be an ISO 8601 date-time');
      }
      if (at <= now) {
        return fail(400, 'INVALID_EXPIRES_AT', `expiresAt ${expiresAt} is not in the future`);
      }
      if (at - now > MAX_OPERATOR_TOKEN_MS) {
        return fail(
          400,
          'INVALID_EXPIRES_AT',
          `expiresAt ${expiresAt} is more than 24 hours ahead (latest: ${new Date(now + MAX_OPERATOR_TOKEN_MS).toISOString()})`,
        );
      }
      const token = await sign(
        {
          typ: 'operator',
          clientId: SANDBOX_CLIENT_ID,
          operatorId,
          iat: Math.floor(now / 1000),
          exp: Math.floor(at / 1000),
        },
        secret,
        'HS256',
      );
      return { ok: true, value: token };
    },

    async validateToken(token) {
      const invalid = (error: string, claims?: TokenClaims): TokenValidation => ({
        isValid: false,
        operatorId: claims?.operatorId ?? null,
        clientId: claims?.clientId ?? null,
        expiresAt: claims?.exp === undefined ? null : new Date(claims.exp * 1000).toISOString(),
        error,
      });
      let payload: unknown;
      try {
        payload = await verify(token, secret, { alg: 'HS256', exp: false, iat: false, nbf: false });
      } catch {
        return invalid('the token is malformed or its signature does not match');
      }
      const parsed = TokenClaims.safeParse(payload);
      if (!parsed.success) return invalid('the token carries no known claims');
      const claims = parsed.data;
      if (claims.typ !== 'operator' || claims.operatorId === undefined) {
        return invalid('not an operator token', claims);
      }
      if (claims.exp !== undefined && claims.exp * 1000 <= deps.clock.now()) {
        return invalid('the token has expired', claims);
      }
      const operator = operators.get(claims.operatorId);
      if (operator === undefined) return invalid('the operator does not exist', claims);
      if (operator.status === OPERATOR_STATUS.deleted) {
        return invalid('the operator is Deleted', claims);
      }
      return {
        isValid: true,
        operatorId: claims.operatorId,
        clientId: claims.clientId,
        expiresAt: claims.exp === undefined ? null : new Date(claims.exp * 1000).toISOString(),
        error: null,
      };
    },

    organizations: () => orgs.map((o) => ({ ...o })),

    listOperators(organizationId) {
      if (!orgs.some((o) => o.id === organizationId)) {
        return fail(
          404,
          'NOT_FOUND',
          `organization ${organizationId} does not exist (known: ${orgs.map((o) => o.id).join(', ')})`,
        );
      }
      return {
        ok: true,
        value: [...operators.values()].filter((o) => o.organization.id === organizationId),
      };
    },

    synchronize(items) {
      const unknown = items.findIndex((i) => !orgs.some((o) => o.id === i.organizationId));
      if (unknown !== -1) {
        return fail(
          400,
          'INVALID_ORGANIZATION',
          `[${unknown}].organizationId: organization ${items[unknown]?.organizationId} does not exist`,
        );
      }
      const created = items.map((item) => {
        const organization = orgs.find((o) => o.id === item.organizationId)!;
        const operator: SandboxOperator = {
          id: nextOperatorId++,
          name: item.name,
          status: OPERATOR_STATUS.active,
          organization: { ...organization },
        };
        operators.set(operator.id, operator);
        return { id: operator.id, name: operator.name, status: operator.status };
      });
      return { ok: true, value: created };
    },

    setStatus(id, status) {
      const operator = operators.get(id);
      if (operator === undefined) return fail(404, 'NOT_FOUND', `operator ${id} does not exist`);
      const from = operator.status;
      if (from === OPERATOR_STATUS.deleted) {
        return fail(
          400,
          'INVALID_STATUS_MOVE',
          `operator ${id} is Deleted, and Deleted is final: it cannot move to ${STATUS_NAME[status]}`,
        );
      }
      if (from === status) return { ok: true, value: operator };
      if (!OPERATOR_MOVES[from].includes(status)) {
        const allowed = OPERATOR_MOVES[from].map((s) => STATUS_NAME[s]).join(' or ');
        return fail(
          400,
          'INVALID_STATUS_MOVE',
          `operator ${id} is ${STATUS_NAME[from]}: it can move to ${allowed}, not ${STATUS_NAME[status]}`,
        );
      }
      operator.status = status;
      return { ok: true, value: operator };
    },

    operators: () => [...operators.values()],

    reset() {
      secret = randomBytes(32).toString('hex');
      operators = new Map();
      nextOperatorId = 1;
    },
  };
}
