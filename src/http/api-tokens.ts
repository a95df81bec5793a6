/**
 * API tokens made through the API (`POST /v1/tokens`, `switchboard tokens create`): each a
 * random `sb_...` string shown once, kept only as its hex SHA-256, with a name and scopes.
 *
 * A request's token is looked up by its hash. Found tokens (revoked ones too) are cached in
 * this process for `CACHE_TTL_MS`: a revocation made here takes effect at once, one made by
 * another instance within that time. `last_used_at` is written at most once a minute per
 * token and process, not on every request.
 *
 * @example
 * const store = createTokenStore({ db, clock });
 * const made = await store.create({ name: 'ci', scopes: ['send'], createdBy: 'API_TOKEN' });
 * await store.authenticate(made.token); // { kind: 'token', name: 'ci', scopes: ['send'], ... }
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from '@hono/zod-openapi';
import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/client.ts';
import { apiTokens } from '../db/schema/api-tokens.ts';
import { AppError } from '../errors.ts';
import { isScope, SCOPES, type Scope } from './scopes.ts';

/** How long a looked-up token is believed before it is read again. */
export const CACHE_TTL_MS = 5_000;
/** `last_used_at` is written at most this often per token (and process). */
export const TOUCH_EVERY_MS = 60_000;
/** Every token starts with this: anything else is not looked up at all. */
export const TOKEN_PREFIX = 'sb_';
/** Names the audit log uses for who is not a stored token. */
export const RESERVED_NAMES = ['API_TOKEN', 'open'] as const;

/** What a token's name may hold (and so what the audit log's `token` filter may). */
export const NameOfToken = z
  .string()
  .min(1)
  .max(64)
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9 ._@-]*$/,
    'letters, digits, space and . _ @ -, starting with a letter or digit',
  );

export const TokenName = NameOfToken.refine(
  (n) => !RESERVED_NAMES.some((r) => r.toLowerCase() === n.toLowerCase()),
  `"${RESERVED_NAMES.join('" and "')}" are reserved for the audit log`,
).meta({ example: 'ci-deploy' });

export const TokenScopes = z
  .array(z.enum(SCOPES))
  .min(1)
  .max(SCOPES.length)
  .refine((s) => new Set(s).size === s.length, 'each scope once')
  .meta({ example: ['send'] });

export const TokenView = z
  .object({
    id: z.string().meta({ example: 'tok_3kVx2mQ9aLr8' }),
    name: z.string(),
    scopes: z.array(z.enum(SCOPES)),
    createdAt: z.string(),
    createdBy: z.string().meta({ description: 'the name of the token that made this one' }),
    lastUsedAt: z
      .string()
      .nullable()
      .meta({ description: 'last use, to within a minute; null: never used' }),
    revokedAt: z.string().nullable(),
  })
  .meta({ id: 'ApiToken' });
export type TokenView = z.infer<typeof TokenView>;

export const CreatedToken = z
  .object({
    id: z.string(),
    name: z.string(),
    scopes: z.array(z.enum(SCOPES)),
    token: z.string().meta({ description: 'the token itself: shown this once, never again' }),
    createdAt: z.string(),
  })
  .meta({ id: 'CreatedApiToken' });
export type CreatedToken = z.infer<typeof CreatedToken>;

/** Who made a request: the environment's token, a stored token, or nobody (open API). */
export type Principal =
  | { kind: 'env'; name: 'API_TOKEN'; scopes: readonly Scope[] }
  | { kind: 'open'; name: 'open'; scopes: readonly Scope[] }
  | { kind: 'token'; id: string; name: string; scopes: readonly Scope[] };

export const ENV_PRINCIPAL: Principal = { kind: 'env', name: 'API_TOKEN', scopes: SCOPES };
export const OPEN_PRINCIPAL: Principal = { kind: 'open', name: 'open', scopes: SCOPES };

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

function newToken(): string {
  return `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

function newId(): string {
  return `tok_${randomBytes(9).toString('base64url')}`;
}

type Row = typeof apiTokens.$inferSelect;

function view(row: Row): TokenView {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes.filter(isScope),
    createdAt: row.createdAt.toISOString(),
    createdBy: row.createdBy,
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
    revokedAt: row.revokedAt?.toISOString() ?? null,
  };
}

interface Cached {
  id: string;
  name: string;
  scopes: Scope[];
  revoked: boolean;
  fetchedAt: number;
  touchedAt: number;
}

export interface TokenStore {
  /** The stored token `presented` stands for; undefined when unknown or revoked. */
  authenticate(presented: string): Promise<Principal | undefined>;
  /** Whether any token was ever made (revoked ones count: revoking never opens the API). */
  anyMade(): Promise<boolean>;
  create(input: { name: string; scopes: Scope[]; createdBy: string }): Promise<CreatedToken>;
  list(): Promise<TokenView[]>;
  /** Revokes the token (at once in this process); undefined when there is no such token. */
  revoke(id: string): Promise<{ token: TokenView; revokedNow: boolean } | undefined>;
}

export function createTokenStore(deps: { db: Db; clock: Clock }): TokenStore {
  const { db, clock } = deps;
  const cache = new Map<string, Cached>();
  let made: { value: boolean; at: number } | undefined;
  const now = () => clock.now().getTime();

  async function lookup(hash: string): Promise<Cached | undefined> {
    const hit = cache.get(hash);
    if (hit && now() - hit.fetchedAt < CACHE_TTL_MS) return hit;
    const [row] = await db
      .select({
        id: apiTokens.id,
        name: apiTokens.name,
        scopes: apiTokens.scopes,
        revokedAt: apiTokens.revokedAt,
      })
      .from(apiTokens)
      .where(eq(apiTokens.hash, hash));
    if (!row) {
      cache.delete(hash);
      return undefined;
    }
    const entry: Cached = {
      id: row.id,
      name: row.name,
      scopes: row.scopes.filter(isScope),
      revoked: row.revokedAt !== null,
      fetchedAt: now(),
      touchedAt: hit?.touchedAt ?? Number.NEGATIVE_INFINITY,
    };
    cache.set(hash, entry);
    return entry;
  }

  return {
    async authenticate(presented) {
      if (!presented.startsWith(TOKEN_PREFIX)) return undefined;
      const entry = await lookup(hashToken(presented));
      if (!entry || entry.revoked) return undefined;
      const t = now();
      if (t - entry.touchedAt >= TOUCH_EVERY_MS) {
        entry.touchedAt = t;
        await db
          .update(apiTokens)
          .set({ lastUsedAt: new Date(t) })
          .where(eq(apiTokens.id, entry.id));
      }
      return { kind: 'token', id: entry.id, name: entry.name, scopes: entry.scopes };
    },

    async anyMade() {
      if (made && (made.value || now() - made.at < CACHE_TTL_MS)) return made.value;
      const [row] = await db.select({ id: apiTokens.id }).from(apiTokens).limit(1);
      made = { value: row !== undefined, at: now() };
      return made.value;
    },

    async create({ name, scopes, createdBy }) {
      const token = newToken();
      const ordered = SCOPES.filter((s) => scopes.includes(s));
      const [row] = await db
        .insert(apiTokens)
        .values({
          id: newId(),
          name,
          hash: hashToken(token),
          scopes: ordered,
          createdAt: clock.now(),
          createdBy,
        })
        .onConflictDoNothing({ target: apiTokens.name, where: sql`revoked_at is null` })
        .returning();
      if (!row) {
        throw new AppError(
          'CONFLICT',
          `a token named "${name}" exists: revoke it or pick another name`,
          [
            {
              path: 'name',
              code: 'DUPLICATE',
              message: 'must differ from every token not revoked',
            },
          ],
        );
      }
      made = { value: true, at: now() };
      return {
        id: row.id,
        name: row.name,
        scopes: ordered,
        token,
        createdAt: row.createdAt.toISOString(),
      };
    },

    async list() {
      const rows = await db.select().from(apiTokens).orderBy(desc(apiTokens.createdAt));
      return rows.map(view);
    },

    async revoke(id) {
      const [revoked] = await db
        .update(apiTokens)
        .set({ revokedAt: clock.now() })
        .where(and(eq(apiTokens.id, id), isNull(apiTokens.revokedAt)))
        .returning();
      for (const [hash, entry] of cache) if (entry.id === id) cache.delete(hash);
      if (revoked) return { token: view(revoked), revokedNow: true };
      const [row] = await db.select().from(apiTokens).where(eq(apiTokens.id, id));
      return row ? { token: view(row), revokedNow: false } : undefined;
    },
  };
}
