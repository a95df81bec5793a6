/**
 * The chat operator client (the provider's chat operator API, at {chat_url}): a company token
 * from login and password, operator tokens that expire at most 24 hours ahead (checked before
 * anything is sent), token validation, the operator list (Bearer and `Accept: text/plain`, as
 * the provider requires for that call), the organization list (`Accept: text/plain`, as
 * organizations.md requires), synchronize, and status changes (0 active, 1 inactive,
 * 2 deleted). 401 and 403 come back as `ProviderError`s of kind `unauthorized` and
 * `forbidden`.
 *
 * With login and password the company token is fetched on first use and kept; the provider
 * gives it no expiry, so a 401 on a later call fetches a new one once and repeats the call.
 */
import { z } from 'zod';
import { AppError } from '../errors.ts';
import { type ClientOptions, clientTransport } from './client.ts';
import { type HttpRequest, ProviderError } from './http.ts';
import { issuesToDetails } from './issues.ts';
import { performanceClock } from './limiter.ts';

export const OperatorStatus = z.union([z.literal(0), z.literal(1), z.literal(2)]);
/**
 * 0 Active, 1 Inactive, 2 Deleted. The provider moves Active to Inactive or Deleted and
 * Inactive back to Active; synchronize creates operators Active.
 */
export type OperatorStatus = z.infer<typeof OperatorStatus>;
export const OPERATOR_STATUS = { active: 0, inactive: 1, deleted: 2 } as const;

/** An organization (organizations.md, "List Organizations"). */
export const Organization = z.looseObject({ id: z.number().int(), name: z.string() });
export type Organization = z.infer<typeof Organization>;

export const Operator = z.looseObject({
  id: z.number().int(),
  name: z.string(),
  status: OperatorStatus,
  organization: Organization.optional(),
});
export type Operator = z.infer<typeof Operator>;

/** What synchronize answers: the created operators, without their organization. */
export const CreatedOperator = z.looseObject({
  id: z.number().int(),
  name: z.string(),
  status: OperatorStatus,
});
export type CreatedOperator = z.infer<typeof CreatedOperator>;

export const TokenValidation = z.looseObject({
  isValid: z.boolean(),
  operatorId: z.number().int().nullish(),
  clientId: z.number().int().nullish(),
  expiresAt: z.string().nullish(),
  error: z.string().nullish(),
});
export type TokenValidation = z.infer<typeof TokenValidation>;

export const OperatorToSync = z.strictObject({
  organizationId: z.number().int(),
  name: z.string().trim().min(1, 'name is required'),
});
export type OperatorToSync = z.infer<typeof OperatorToSync>;

/** How long an operator token may live: the provider takes an expiresAt at most 24 hours ahead. */
export const MAX_OPERATOR_TOKEN_MS = 24 * 60 * 60 * 1000;

export type ChatAuth = { login: string; password: string } | { companyToken: string };

export interface ChatClient {
  /** The company token, fetched with login and password on first use. */
  companyToken(): Promise<string>;
  /** An operator token; `expiresAt` must be in the future and at most 24 hours ahead. */
  getOperatorToken(operatorId: number, expiresAt: Date | string): Promise<string>;
  validateToken(token: string): Promise<TokenValidation>;
  listOperators(organizationId: number): Promise<Operator[]>;
  synchronizeOperators(operators: OperatorToSync[]): Promise<CreatedOperator[]>;
  setOperatorStatus(operatorId: number, status: OperatorStatus): Promise<void>;
  /** GET /api/company/organization: the organizations the company token reaches. */
  getOrganization(): Promise<Organization[]>;
}

/**
 * Checks an operator token expiry against `now`: in the future, at most 24 hours ahead.
 * Returns it as an ISO string; throws an `AppError` (VALIDATION_ERROR, path `expiresAt`).
 */
export function checkOperatorExpiry(expiresAt: Date | string, now: number): string {
  const fail = (message: string): never => {
    throw new AppError('VALIDATION_ERROR', `expiresAt: ${message}`, [
      { path: 'expiresAt', code: 'INVALID_EXPIRY', message },
    ]);
  };
  let at: number;
  if (expiresAt instanceof Date) at = expiresAt.getTime();
  else if (z.iso.datetime({ offset: true }).safeParse(expiresAt).success)
    at = Date.parse(expiresAt);
  else return fail('must be an ISO 8601 date-time with a zone');
  if (Number.isNaN(at)) return fail('is not a valid date');
  if (at <= now) return fail('must be in the future');
  if (at - now > MAX_OPERATOR_TOKEN_MS) return fail('must be at most 24 hours ahead');
  return new Date(at).toISOString();
}

/** The token from a get-token answer: a JSON string, `{token}`, or the bare JWT as text. */
export function parseTokenResponse(json: unknown, text: string): string | undefined {
  if (typeof json === 'string' && json !== '') return json;
  if (json && typeof json === 'object') {
    const o = json as Record<string, unknown>;
    for (const key of ['token', 'accessToken', 'access_token', 'jwt']) {
      if (typeof o[key] === 'string' && o[key] !== '') return o[key] as string;
    }
    return undefined;
  }
  const bare = text.trim();
  return /^[\w-]+\.[\w-]+\.[\w-]*$/.test(bare) ? bare : undefined;
}

function check<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const details = issuesToDetails(parsed.error.issues);
  const first = details[0];
  throw new AppError(
    'VALIDATION_ERROR',
    `invalid ${what}: ${first?.path || what}: ${first?.message}`,
    details,
  );
}

function parseBody<T>(schema: z.ZodType<T>, json: unknown, req: HttpRequest, text: string): T {
  const parsed = schema.safeParse(json);
  if (parsed.success) return parsed.data;
  throw new ProviderError(
    'invalid_response',
    `${req.method} ${req.path}: unexpected body ${text.slice(0, 200)}`,
    {
      body: json ?? text,
      method: req.method,
      path: req.path,
    },
  );
}

/**
 * @example
 * const chat = createChatClient({ baseUrl: chatUrl, auth: { login: 'acme', password: 's' }, limiter });
 * const token = await chat.getOperatorToken(7, new Date(Date.now() + 3600_000));
 */
export function createChatClient(
  opts: ClientOptions & { auth: ChatAuth; tokenHeader?: 'bearer' | 'x-authorization-key' },
): ChatClient {
  const { transport } = clientTransport(opts);
  const clock = opts.clock ?? performanceClock;
  let cached: Promise<string> | undefined =
    'companyToken' in opts.auth ? Promise.resolve(opts.auth.companyToken) : undefined;

  const fetchCompanyToken = async (): Promise<string> => {
    if (!('login' in opts.auth)) throw new Error('unreachable: no credentials');
    const req: HttpRequest = {
      method: 'POST',
      path: '/api/company/get-token',
      limitClass: 'chat',
      json: { login: opts.auth.login, password: opts.auth.password },
    };
    const res = await transport.request(req);
    const token = parseTokenResponse(res.json, res.text);
    if (!token) return parseBody(z.never(), res.json, req, res.text);
    return token;
  };

  const companyToken = () => {
    cached ??= fetchCompanyToken().catch((e: unknown) => {
      cached = undefined; // a failed login is not kept
      throw e;
    });
    return cached;
  };

  const authHeader = (token: string): Record<string, string> =>
    opts.tokenHeader === 'x-authorization-key'
      ? { 'X-Authorization-Key': token }
      : { Authorization: `Bearer ${token}` };

  /** A call with the company token; one fresh login and repeat on 401 when we can log in. */
  async function withCompany(
    req: HttpRequest,
    headers?: (token: string) => Record<string, string>,
  ) {
    const send = async () => {
      const token = await companyToken();
      return transport.request({
        ...req,
        headers: { ...(headers ?? authHeader)(token), ...req.headers },
      });
    };
    try {
      return await send();
    } catch (e) {
      if (!(e instanceof ProviderError) || e.kind !== 'unauthorized' || !('login' in opts.auth))
        throw e;
      cached = undefined;
      return send();
    }
  }

  return {
    companyToken,
    async getOperatorToken(operatorId, expiresAt) {
      const id = check(z.number().int().positive(), operatorId, 'operator id');
      const at = checkOperatorExpiry(expiresAt, clock.now());
      const req: HttpRequest = {
        method: 'POST',
        path: '/api/operator/get-token',
        limitClass: 'chat',
        json: { id, expiresAt: at },
      };
      const res = await withCompany(req);
      const token = parseTokenResponse(res.json, res.text);
      return token ?? parseBody(z.never(), res.json, req, res.text);
    },
    async validateToken(token) {
      check(z.string().min(1), token, 'token');
      const req: HttpRequest = {
        method: 'POST',
        path: '/api/operator/validate-token',
        limitClass: 'chat',
        json: { token },
      };
      const res = await withCompany(req);
      return parseBody(TokenValidation, res.json, req, res.text);
    },
    async listOperators(organizationId) {
      const orgId = check(z.number().int(), organizationId, 'organizationId');
      const req: HttpRequest = {
        method: 'GET',
        path: '/api/operator',
        query: { organizationId: orgId },
        limitClass: 'chat',
        headers: { Accept: 'text/plain' },
      };
      // The provider requires Bearer here whatever header the other calls use.
      const res = await withCompany(req, (token) => ({ Authorization: `Bearer ${token}` }));
      return parseBody(z.array(Operator), res.json, req, res.text);
    },
    async synchronizeOperators(operators) {
      const body = check(z.array(OperatorToSync).min(1), operators, 'operators');
      const req: HttpRequest = {
        method: 'POST',
        path: '/api/operator/synchronize',
        limitClass: 'chat',
        json: body,
        // It creates operators: repeating it after a 5xx could create them twice.
        retry: false,
      };
      const res = await withCompany(req);
      return parseBody(z.array(CreatedOperator), res.json, req, res.text);
    },
    async setOperatorStatus(operatorId, status) {
      const body = check(
        z.strictObject({ id: z.number().int(), status: OperatorStatus }),
        { id: operatorId, status },
        'operator status',
      );
      await withCompany({
        method: 'POST',
        path: '/api/operator/status',
        limitClass: 'chat',
        json: body,
      });
    },
    async getOrganization() {
      const req: HttpRequest = {
        method: 'GET',
        path: '/api/company/organization',
        limitClass: 'chat',
        // organizations.md ("Headers"): Accept: text/plain is required, as for the operators
        headers: { Accept: 'text/plain' },
      };
      const res = await withCompany(req);
      return parseBody(z.array(Organization), res.json, req, res.text);
    },
  };
}
