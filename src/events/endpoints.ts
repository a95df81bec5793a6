/**
 * The user's endpoints (their own systems that receive Switchboard's events): the store behind
 * `/v1/endpoints`, shared with ENDPOINTS_FILE (src/events/endpoints-file.ts) and the console.
 *
 * Rules kept here, in one place:
 * - A secret (`whsec_...`) is answered once, when it is made (creation, rotation); no read
 *   shows one, only how many sign and until when.
 * - Rotation makes a new secret that signs at once; the ones before it keep signing too until
 *   the overlap ends (default 24 h, 0: dropped at once), so a receiver can switch without
 *   losing a request. Expired secrets are dropped at the next write.
 * - A URL must pass the outbound policy (src/http/outbound.ts) when it is stored: http(s), no
 *   credentials, and not a private, loopback or reserved address unless
 *   OUTBOUND_ALLOW_PRIVATE=true. A name that does not resolve now is taken (it may later);
 *   the worker checks every request again anyway.
 * - Endpoints from ENDPOINTS_FILE (`source: file`) are read-only here: 409 ENDPOINT_READ_ONLY.
 * - After every write this process's subscription cache is told at once (`changed()`), so a
 *   new endpoint gets the next event; other instances see it within their refresh interval.
 *
 * @example
 * const store = createEndpointStore({ db, clock, checkUrl: outbound.check });
 * const made = await store.create({ url: 'https://crm.example.com/hooks', events: ['call.ended'] });
 * made.secret; // 'whsec_...': shown this once
 * await store.rotate(made.id, { overlapSeconds: 3600 });
 */
import { randomBytes } from 'node:crypto';
import { z } from '@hono/zod-openapi';
import { desc, eq } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import type { Db, Queryable } from '../db/client.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { endpoints } from '../db/schema/endpoints.ts';
import { AppError, type ErrorDetail } from '../errors.ts';
import { ENDPOINT_NAME_PATTERN } from '../flows/schema.ts';
import type { OutboundCheck } from '../http/outbound.ts';
import { addRule } from '../provider/issues.ts';
import { newEndpointSecret } from './sign.ts';
import { subscriptionsOf } from './subscriptions.ts';
import { EVENT_TYPES } from './types.ts';

/** How long the secrets before a rotation keep signing, unless the request says otherwise. */
export const DEFAULT_OVERLAP_SECONDS = 24 * 60 * 60;
/** The longest overlap a rotation may ask for. */
export const MAX_OVERLAP_SECONDS = 7 * 24 * 60 * 60;
/** How long a URL's host may take to resolve when it is stored; past it the URL is taken. */
export const URL_CHECK_TIMEOUT_MS = 2_000;

const ID_PREFIX = 'ep_';
// the one rule for an endpoint's name, the flow language's (a `notify:` names endpoints)
const SLUG = ENDPOINT_NAME_PATTERN;
const SLUG_RULE =
  'a slug: lower-case letters, digits and -, at most 64, not starting or ending with -';

/** One stored secret: `expiresAt` null while it is the newest (or one of a file's). */
export interface StoredSecret {
  secret: string;
  expiresAt: string | null;
}

/** The secrets that sign at `now`, newest first. */
export function liveSecrets(stored: unknown, now: Date): StoredSecret[] {
  if (!Array.isArray(stored)) return [];
  return (stored as StoredSecret[]).filter(
    (s) =>
      typeof s?.secret === 'string' &&
      (s.expiresAt === null || new Date(s.expiresAt).getTime() > now.getTime()),
  );
}

/** Whether `value` is an endpoint name (the slug a flow's `notify:` and ENDPOINTS_FILE use). */
export function isEndpointName(value: string): boolean {
  return SLUG.test(value);
}

export const EndpointNameField = z.string().max(64).regex(SLUG, SLUG_RULE).meta({
  description: "a short unique name: what a flow's `notify:` names",
  example: 'crm',
});

/** The rules a URL is held to without resolving anything (the rest: `checkEndpointUrl`). */
function staticUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute URL (https://...)';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `must be an http or https URL, not ${url.protocol.slice(0, -1)}`;
  }
  if (url.username !== '' || url.password !== '') {
    return 'must not hold credentials (user:password@): the signature proves who is calling';
  }
  return undefined;
}

export const EndpointUrl = z
  .string()
  .min(1)
  .max(2000)
  .superRefine((v, ctx) => {
    const problem = staticUrlProblem(v);
    if (problem) addRule(ctx, [], 'INVALID_URL', problem);
  })
  .meta({
    description:
      'where events are POSTed: http(s), no credentials, not a private or loopback address (unless OUTBOUND_ALLOW_PRIVATE=true)',
    example: 'https://crm.example.com/hooks/switchboard',
  });

export const EventTypeName = z
  .string()
  .max(100)
  .superRefine((v, ctx) => {
    if (!(EVENT_TYPES as readonly string[]).includes(v)) {
      addRule(
        ctx,
        [],
        'UNKNOWN_EVENT_TYPE',
        `"${v.slice(0, 100)}" is not an event type: one of ${EVENT_TYPES.join(', ')}`,
      );
    }
  })
  .meta({ description: 'an event type of the catalog (docs/events.md)', example: 'call.ended' });

export const EventTypeList = z
  .array(EventTypeName)
  .min(1)
  .max(100)
  .refine((l) => new Set(l).size === l.length, 'each type once')
  .meta({
    description: 'the event types it receives; absent or null: every type, new ones too',
    example: ['call.ended', 'message.status'],
  });

const Description = z.string().max(500).meta({ example: 'CRM: call outcomes' });
const RateLimit = z.number().int().min(1).max(10_000).meta({
  description: 'at most this many requests per second to it; null: no limit',
  example: 20,
});
const Ordered = z.boolean().meta({
  description:
    "one subject's events (one call's, one message's) are sent in the order they happened: the next waits while one is retried",
});

export const CreateEndpoint = z
  .strictObject({
    url: EndpointUrl,
    name: EndpointNameField.optional(),
    description: Description.optional(),
    events: EventTypeList.nullable().optional(),
    enabled: z.boolean().optional(),
    rateLimit: RateLimit.nullable().optional(),
    ordered: Ordered.optional(),
  })
  .meta({
    id: 'CreateEndpoint',
    example: {
      url: 'https://crm.example.com/hooks/switchboard',
      name: 'crm',
      events: ['call.ended'],
    },
  });
export type CreateEndpoint = z.infer<typeof CreateEndpoint>;

export const UpdateEndpoint = z
  .strictObject({
    url: EndpointUrl.optional(),
    name: EndpointNameField.nullable().optional(),
    description: Description.optional(),
    events: EventTypeList.nullable().optional(),
    enabled: z.boolean().optional().meta({
      description: 'true also clears a disabling by Switchboard (disabledReason)',
    }),
    rateLimit: RateLimit.nullable().optional(),
    ordered: Ordered.optional(),
  })
  .meta({ id: 'UpdateEndpoint', example: { enabled: true, events: null } });
export type UpdateEndpoint = z.infer<typeof UpdateEndpoint>;

export const EndpointView = z
  .object({
    id: z.string().meta({ example: 'ep_4fQ9xk2LmB7wZr1c' }),
    name: z.string().nullable(),
    url: z.string(),
    description: z.string(),
    events: z
      .array(z.string())
      .nullable()
      .meta({ description: 'the event types it receives; null: every type' }),
    enabled: z.boolean(),
    rateLimit: z.number().int().nullable(),
    ordered: z.boolean(),
    source: z.enum(['api', 'file']).meta({
      description: '`file`: declared in ENDPOINTS_FILE, read-only through the API',
    }),
    secrets: z
      .array(
        z.object({
          expiresAt: z
            .string()
            .nullable()
            .meta({ description: 'when it stops signing; null: the newest, no end' }),
        }),
      )
      .meta({
        description:
          'the secrets that sign each request now, newest first (never the secrets themselves)',
      }),
    failingSince: z.string().nullable().meta({
      description: 'since when every attempt to it has failed; null: the last one worked',
    }),
    disabledReason: z.string().nullable().meta({
      description:
        'why Switchboard disabled it (it kept failing, or it left ENDPOINTS_FILE); null otherwise',
    }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Endpoint' });
export type EndpointView = z.infer<typeof EndpointView>;

export const EndpointWithSecret = EndpointView.extend({
  secret: z.string().meta({
    description: 'the new signing secret (`whsec_` and base64): shown this once, never again',
    example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  }),
}).meta({ id: 'EndpointWithSecret' });
export type EndpointWithSecret = z.infer<typeof EndpointWithSecret>;

type Row = typeof endpoints.$inferSelect;

export function endpointView(row: Row, now: Date): EndpointView {
  return {
    id: row.id,
    name: row.name,
    url: row.url,
    description: row.description,
    events: row.eventTypes,
    enabled: row.enabled,
    rateLimit: row.rateLimit,
    ordered: row.ordered,
    source: row.source === 'file' ? 'file' : 'api',
    secrets: liveSecrets(row.secrets, now).map((s) => ({ expiresAt: s.expiresAt })),
    failingSince: row.failingSince?.toISOString() ?? null,
    disabledReason: row.disabledReason,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The outbound policy's verdict on a URL (`OutboundPolicy.check`). */
export type UrlCheck = (url: string) => Promise<OutboundCheck>;

/**
 * The problem with storing `url`, or undefined: the static rules, then the outbound policy's
 * address rule. A host that does not resolve (now, or within URL_CHECK_TIMEOUT_MS) is taken.
 */
export async function endpointUrlProblem(
  check: UrlCheck,
  url: string,
): Promise<ErrorDetail | undefined> {
  const problem = staticUrlProblem(url);
  if (problem) return { path: 'url', code: 'INVALID_URL', message: problem };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), URL_CHECK_TIMEOUT_MS);
    timer.unref();
  });
  // anything but a refusal (a name that does not resolve) is no reason to refuse the URL
  const verdict = await Promise.race([check(url).catch(() => undefined), late]);
  clearTimeout(timer);
  if (verdict && !verdict.ok) {
    return {
      path: 'url',
      code: 'ADDRESS_NOT_ALLOWED',
      message: `is refused by the outbound policy: ${verdict.reason} (OUTBOUND_ALLOW_PRIVATE=true allows private addresses)`,
    };
  }
  return undefined;
}

async function assertUrlAllowed(check: UrlCheck, url: string): Promise<void> {
  const problem = await endpointUrlProblem(check, url);
  if (problem) {
    throw new AppError('VALIDATION_ERROR', `url: ${problem.message}`, [problem]);
  }
}

function nameTaken(name: string): AppError {
  return new AppError('CONFLICT', `an endpoint named "${name}" exists: pick another name`, [
    { path: 'name', code: 'DUPLICATE', message: 'must differ from every other endpoint' },
  ]);
}

function readOnly(row: Pick<Row, 'id' | 'name'>): AppError {
  return new AppError(
    'ENDPOINT_READ_ONLY',
    `endpoint ${row.id}${row.name ? ` ("${row.name}")` : ''} is declared in ENDPOINTS_FILE: change it in the file and restart`,
  );
}

function notFound(id: string): AppError {
  return new AppError('NOT_FOUND', `no endpoint "${id.slice(0, 64)}"`);
}

/** A new endpoint id: `ep_` and 16 random base64url characters. */
export function newEndpointId(): string {
  return `${ID_PREFIX}${randomBytes(12).toString('base64url')}`;
}

/** The secrets after a rotation at `now`: the new one, then the live ones until `overlap` ends. */
export function rotatedSecrets(
  stored: unknown,
  fresh: string,
  now: Date,
  overlapSeconds: number,
): StoredSecret[] {
  const until = new Date(now.getTime() + overlapSeconds * 1000);
  if (overlapSeconds === 0) return [{ secret: fresh, expiresAt: null }];
  const kept = liveSecrets(stored, now).map((s) => ({
    secret: s.secret,
    // a secret already ending keeps its earlier end
    expiresAt:
      s.expiresAt !== null && new Date(s.expiresAt) < until ? s.expiresAt : until.toISOString(),
  }));
  return [{ secret: fresh, expiresAt: null }, ...kept];
}

/** The endpoint `ref` names: an `ep_` id, or else a name (names cannot start with `ep_`). */
function refersTo(ref: string) {
  return ref.startsWith(ID_PREFIX) ? eq(endpoints.id, ref) : eq(endpoints.name, ref);
}

/** One endpoint by id or name. */
export async function findEndpoint(db: Queryable, ref: string): Promise<Row | undefined> {
  const [row] = await db.select().from(endpoints).where(refersTo(ref));
  return row;
}

/** Every endpoint, newest first (what the API and the console list). */
export async function listEndpoints(db: Queryable, now: Date): Promise<EndpointView[]> {
  const rows = await db
    .select()
    .from(endpoints)
    .orderBy(desc(endpoints.createdAt), desc(endpoints.id));
  return rows.map((r) => endpointView(r, now));
}

/** One endpoint by id or name; NOT_FOUND when there is none. */
export async function getEndpoint(db: Queryable, ref: string, now: Date): Promise<EndpointView> {
  const row = await findEndpoint(db, ref);
  if (!row) throw notFound(ref);
  return endpointView(row, now);
}

export interface EndpointStore {
  create(input: CreateEndpoint): Promise<EndpointWithSecret>;
  /** Every endpoint, newest first. */
  list(): Promise<EndpointView[]>;
  /** One endpoint by id (or name); NOT_FOUND when there is none. */
  get(ref: string): Promise<EndpointView>;
  /** (`ref`: an id or a name, here and below) */
  update(ref: string, patch: UpdateEndpoint): Promise<EndpointView>;
  /** Deletes it with its queue and attempts; the events stay for the other endpoints. */
  remove(ref: string): Promise<EndpointView>;
  rotate(ref: string, opts?: { overlapSeconds?: number | undefined }): Promise<EndpointWithSecret>;
}

export function createEndpointStore(deps: {
  db: Db;
  clock: Clock;
  checkUrl: UrlCheck;
}): EndpointStore {
  const { db, clock } = deps;
  const changed = () => subscriptionsOf(db).changed();

  /** The api endpoint `id`, locked; NOT_FOUND, or ENDPOINT_READ_ONLY for a file one. */
  async function writable(tx: Queryable, ref: string): Promise<Row> {
    const [row] = await tx.select().from(endpoints).where(refersTo(ref)).for('update');
    if (!row) throw notFound(ref);
    if (row.source === 'file') throw readOnly(row);
    return row;
  }

  return {
    async create(input) {
      await assertUrlAllowed(deps.checkUrl, input.url);
      const secret = newEndpointSecret();
      const now = clock.now();
      let row: Row | undefined;
      try {
        [row] = await db
          .insert(endpoints)
          .values({
            id: newEndpointId(),
            name: input.name ?? null,
            url: input.url,
            description: input.description ?? '',
            eventTypes: input.events ?? null,
            enabled: input.enabled ?? true,
            rateLimit: input.rateLimit ?? null,
            ordered: input.ordered ?? false,
            source: 'api',
            secrets: [{ secret, expiresAt: null }] satisfies StoredSecret[],
            createdAt: now,
            updatedAt: now,
          })
          .returning();
      } catch (err) {
        if (input.name && isUniqueViolation(err, 'endpoints_name_idx')) throw nameTaken(input.name);
        throw err;
      }
      if (!row) throw new Error('insert returned no row');
      changed();
      return { ...endpointView(row, now), secret };
    },

    list: () => listEndpoints(db, clock.now()),
    get: (ref) => getEndpoint(db, ref, clock.now()),

    async update(ref, patch) {
      if (patch.url !== undefined) await assertUrlAllowed(deps.checkUrl, patch.url);
      const now = clock.now();
      let row: Row | undefined;
      try {
        row = await db.transaction(async (tx) => {
          const { id } = await writable(tx, ref);
          const [updated] = await tx
            .update(endpoints)
            .set({
              ...(patch.url !== undefined && { url: patch.url }),
              ...(patch.name !== undefined && { name: patch.name }),
              ...(patch.description !== undefined && { description: patch.description }),
              ...(patch.events !== undefined && { eventTypes: patch.events }),
              ...(patch.rateLimit !== undefined && { rateLimit: patch.rateLimit }),
              ...(patch.ordered !== undefined && { ordered: patch.ordered }),
              // a person's choice replaces Switchboard's: enabling starts a fresh failing period
              ...(patch.enabled !== undefined && {
                enabled: patch.enabled,
                disabledReason: null,
                ...(patch.enabled && { failingSince: null }),
              }),
              updatedAt: now,
            })
            .where(eq(endpoints.id, id))
            .returning();
          return updated;
        });
      } catch (err) {
        if (patch.name && isUniqueViolation(err, 'endpoints_name_idx')) throw nameTaken(patch.name);
        throw err;
      }
      if (!row) throw notFound(ref);
      changed();
      return endpointView(row, now);
    },

    async remove(ref) {
      const row = await db.transaction(async (tx) => {
        const found = await writable(tx, ref);
        await tx.delete(endpoints).where(eq(endpoints.id, found.id));
        return found;
      });
      changed();
      return endpointView(row, clock.now());
    },

    async rotate(ref, opts = {}) {
      const overlap = opts.overlapSeconds ?? DEFAULT_OVERLAP_SECONDS;
      const secret = newEndpointSecret();
      const now = clock.now();
      const row = await db.transaction(async (tx) => {
        const found = await writable(tx, ref);
        const [updated] = await tx
          .update(endpoints)
          .set({ secrets: rotatedSecrets(found.secrets, secret, now, overlap), updatedAt: now })
          .where(eq(endpoints.id, found.id))
          .returning();
        return updated;
      });
      if (!row) throw notFound(ref);
      changed();
      return { ...endpointView(row, now), secret };
    },
  };
}
