/**
 * ENDPOINTS_FILE: event endpoints declared in a YAML file kept with the deployment, applied at
 * every start. Each entry is an endpoint with `source: file`: created when new, changed to
 * match the file when it differs, and disabled (never deleted: its attempts stay readable)
 * once it leaves the file. The API cannot change them (409 ENDPOINT_READ_ONLY).
 *
 * A secret does not belong in version control: an entry names the environment variable that
 * holds it (`secretEnv`). The variable may hold several secrets, comma-separated, newest
 * first: each one signs every request, which is how a file endpoint's secret is rotated (add
 * the new one in front, then drop the old one once the receiver has switched).
 *
 * A bad file stops the start with every problem at file:line:column (the flow loader's
 * `locate` finds where in the YAML): not YAML, unknown fields, a bad URL or event type, a name
 * given twice or taken by an endpoint made through the API, a variable unset or not holding
 * a `whsec_` secret. The secret's value never appears in a message.
 *
 * @example
 * // ENDPOINTS_FILE=deploy/endpoints.yaml, CRM_WEBHOOK_SECRET=whsec_...
 * // endpoints:
 * //   - name: crm
 * //     url: https://crm.example.com/hooks/switchboard
 * //     events: [call.ended, flow.notify]
 * //     secretEnv: CRM_WEBHOOK_SECRET
 * const declared = await loadEndpointsFile(config); // undefined when ENDPOINTS_FILE is unset
 * if (declared) await applyEndpointsFile(db, declared, clock);
 */
import { readFile } from 'node:fs/promises';
import { z } from '@hono/zod-openapi';
import { eq, inArray, or, sql } from 'drizzle-orm';
import { LineCounter, parseDocument, type Node as YamlNode } from 'yaml';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/client.ts';
import { endpoints } from '../db/schema/endpoints.ts';
import { formatPath } from '../errors.ts';
import { locate } from '../flows/loader.ts';
import { createOutboundPolicy } from '../http/outbound.ts';
import {
  EndpointNameField,
  EndpointUrl,
  EventTypeList,
  endpointUrlProblem,
  newEndpointId,
  type StoredSecret,
  type UrlCheck,
} from './endpoints.ts';
import { subscriptionsOf } from './subscriptions.ts';

/** What `disabledReason` says of a file endpoint no longer in the file. */
export const REMOVED_FROM_FILE = 'removed from ENDPOINTS_FILE';

// an arbitrary constant shared by every Switchboard process: "applying ENDPOINTS_FILE"
const ENDPOINTS_FILE_LOCK = 0x5b_0011;

const SECRET = /^whsec_[A-Za-z0-9+/]+={0,2}$/;

const FileEndpoint = z.strictObject({
  name: EndpointNameField,
  url: EndpointUrl,
  events: EventTypeList.nullable().optional(),
  description: z.string().max(500).optional(),
  enabled: z.boolean().optional(),
  rateLimit: z.number().int().min(1).max(10_000).nullable().optional(),
  ordered: z.boolean().optional(),
  secretEnv: z
    .string()
    .max(200)
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable'),
});

const FileSchema = z.strictObject({ endpoints: z.array(FileEndpoint).max(100) });

/** One problem of the file, where it is. */
export interface FileProblem {
  line: number;
  column: number;
  /** where in the file's data, like `endpoints[1].url`; empty for the file as a whole */
  path: string;
  message: string;
}

/** The file cannot be applied; the message lists every problem at file:line:column. */
export class EndpointsFileError extends Error {
  constructor(
    readonly file: string,
    readonly problems: FileProblem[],
  ) {
    super(
      `ENDPOINTS_FILE ${file} cannot be applied:\n${problems
        .map((p) => `  ${file}:${p.line}:${p.column}: ${p.path ? `${p.path}: ` : ''}${p.message}`)
        .join('\n')}`,
    );
    this.name = 'EndpointsFileError';
  }
}

/** One endpoint as the file declares it, its secrets read from the environment. */
export interface DeclaredEndpoint {
  name: string;
  url: string;
  description: string;
  events: string[] | null;
  enabled: boolean;
  rateLimit: number | null;
  ordered: boolean;
  /** newest first */
  secrets: string[];
  /** where its entry is (for a problem found when applying it) */
  line: number;
  column: number;
}

export interface DeclaredEndpoints {
  file: string;
  endpoints: DeclaredEndpoint[];
}

/** Why `value` (a variable's) is not a list of secrets; never quotes it. */
function secretsProblem(variable: string, value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === '') {
    return `${variable} is not set: it must hold the endpoint's secret (whsec_ and base64 of 24 to 64 random bytes)`;
  }
  const parts = value.split(',').map((s) => s.trim());
  for (const [i, part] of parts.entries()) {
    const bytes = SECRET.test(part) ? Buffer.from(part.slice(6), 'base64').length : 0;
    if (bytes < 24 || bytes > 64) {
      const which = parts.length > 1 ? `the secret at position ${i + 1} of ${variable}` : variable;
      return `${which} is not a secret: each must be whsec_ and base64 of 24 to 64 random bytes`;
    }
  }
  return undefined;
}

/**
 * Parses and checks the file's text: every problem at once, or the endpoints it declares.
 * `checkUrl` is the outbound policy's (a URL must pass it as through the API).
 */
export async function parseEndpointsFile(
  source: string,
  file: string,
  deps: { secretFromEnv: (name: string) => string | undefined; checkUrl: UrlCheck },
): Promise<DeclaredEndpoints> {
  const lines = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lines, prettyErrors: false });
  const problems: FileProblem[] = [];
  const at = (offset: number, path: (string | number)[], message: string) => {
    const pos = lines.linePos(offset);
    problems.push({ line: pos.line, column: pos.col, path: formatPath(path), message });
  };
  const root = doc.contents as YamlNode | null;
  const atPath = (path: (string | number)[], message: string, atKey = false) =>
    at(locate(root, path, atKey), path, message);

  for (const e of doc.errors) at(e.pos[0], [], e.message.split('\n')[0]!);
  if (problems.length > 0) throw new EndpointsFileError(file, problems);

  const parsed = FileSchema.safeParse(doc.toJS({ maxAliasCount: 100 }) ?? { endpoints: [] });
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const path = issue.path.map((p) => (typeof p === 'number' ? p : String(p)));
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys) atPath([...path, key], `unknown field "${key}"`, true);
      } else {
        atPath(path, issue.message);
      }
    }
    throw new EndpointsFileError(file, problems);
  }

  const seen = new Set<string>();
  const declared: DeclaredEndpoint[] = [];
  for (const [i, entry] of parsed.data.endpoints.entries()) {
    if (seen.has(entry.name)) {
      atPath(['endpoints', i, 'name'], `"${entry.name}" is the name of an earlier entry too`);
    }
    seen.add(entry.name);
    const value = deps.secretFromEnv(entry.secretEnv);
    const secretProblem = secretsProblem(entry.secretEnv, value);
    if (secretProblem) atPath(['endpoints', i, 'secretEnv'], secretProblem);
    const urlProblem = await endpointUrlProblem(deps.checkUrl, entry.url);
    if (urlProblem) atPath(['endpoints', i, 'url'], urlProblem.message);
    const pos = lines.linePos(locate(root, ['endpoints', i], false));
    declared.push({
      name: entry.name,
      url: entry.url,
      description: entry.description ?? '',
      events: entry.events ?? null,
      enabled: entry.enabled ?? true,
      rateLimit: entry.rateLimit ?? null,
      ordered: entry.ordered ?? false,
      secrets: (value ?? '').split(',').map((s) => s.trim()),
      line: pos.line,
      column: pos.col,
    });
  }
  if (problems.length > 0) throw new EndpointsFileError(file, problems);
  return { file, endpoints: declared };
}

/** Reads ENDPOINTS_FILE when it is set; a missing or bad file throws EndpointsFileError. */
export async function loadEndpointsFile(
  config: Pick<Config, 'endpointsFile' | 'secretFromEnv' | 'outboundAllowPrivate' | 'publicUrl'>,
): Promise<DeclaredEndpoints | undefined> {
  const file = config.endpointsFile;
  if (file === undefined) return undefined;
  let source: string;
  try {
    source = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new EndpointsFileError(file, [
      {
        line: 1,
        column: 1,
        path: '',
        message: code === 'ENOENT' ? 'no such file' : `cannot be read (${code ?? 'error'})`,
      },
    ]);
  }
  const outbound = createOutboundPolicy({
    allowPrivate: config.outboundAllowPrivate,
    ownOrigins: [config.publicUrl],
  });
  try {
    return await parseEndpointsFile(source, file, {
      secretFromEnv: config.secretFromEnv,
      checkUrl: outbound.check,
    });
  } finally {
    await outbound.close();
  }
}

export interface AppliedEndpoints {
  created: string[];
  updated: string[];
  /** file endpoints no longer in the file, disabled now */
  disabled: string[];
}

type Row = typeof endpoints.$inferSelect;

const sameList = (a: readonly string[] | null, b: readonly string[] | null) =>
  a === b || (a !== null && b !== null && a.length === b.length && a.every((x, i) => x === b[i]));

/** The columns a file entry sets, with Switchboard's own state cleared where the file decides. */
function columnsOf(d: DeclaredEndpoint, row: Row | undefined) {
  const secrets: StoredSecret[] = d.secrets.map((secret) => ({ secret, expiresAt: null }));
  const reEnabled = d.enabled && row !== undefined && !row.enabled;
  return {
    url: d.url,
    description: d.description,
    eventTypes: d.events,
    enabled: d.enabled,
    rateLimit: d.rateLimit,
    ordered: d.ordered,
    secrets,
    // the file is the person's choice: whatever disabled it before, it starts afresh
    disabledReason: null,
    ...(reEnabled && { failingSince: null }),
  };
}

function differs(row: Row, c: ReturnType<typeof columnsOf>): boolean {
  return (
    row.url !== c.url ||
    row.description !== c.description ||
    !sameList(row.eventTypes, c.eventTypes) ||
    row.enabled !== c.enabled ||
    row.rateLimit !== c.rateLimit ||
    row.ordered !== c.ordered ||
    row.disabledReason !== c.disabledReason ||
    JSON.stringify(row.secrets) !== JSON.stringify(c.secrets)
  );
}

/**
 * Makes the `file` endpoints match `declared`, in one transaction (instances starting
 * together take turns): new names created, changed ones updated, the ones gone disabled. A
 * name taken by an endpoint made through the API is an error naming the entry.
 */
export async function applyEndpointsFile(
  db: Db,
  declared: DeclaredEndpoints,
  clock: Clock,
): Promise<AppliedEndpoints> {
  const now = clock.now();
  const names = declared.endpoints.map((d) => d.name);
  const result = await db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${ENDPOINTS_FILE_LOCK})`);
    const rows = await tx
      .select()
      .from(endpoints)
      .where(
        names.length > 0
          ? or(eq(endpoints.source, 'file'), inArray(endpoints.name, names))
          : eq(endpoints.source, 'file'),
      );
    const byName = new Map(rows.flatMap((r) => (r.name === null ? [] : [[r.name, r] as const])));
    const taken = declared.endpoints.filter((d) => byName.get(d.name)?.source === 'api');
    if (taken.length > 0) {
      throw new EndpointsFileError(
        declared.file,
        taken.map((d) => ({
          line: d.line,
          column: d.column,
          path: '',
          message: `the name "${d.name}" is taken by an endpoint made through the API (${byName.get(d.name)?.id}): rename one of them`,
        })),
      );
    }
    const applied: AppliedEndpoints = { created: [], updated: [], disabled: [] };
    for (const d of declared.endpoints) {
      const row = byName.get(d.name);
      const columns = columnsOf(d, row);
      if (!row) {
        await tx.insert(endpoints).values({
          id: newEndpointId(),
          name: d.name,
          source: 'file',
          ...columns,
          createdAt: now,
          updatedAt: now,
        });
        applied.created.push(d.name);
      } else if (differs(row, columns)) {
        await tx
          .update(endpoints)
          .set({ ...columns, updatedAt: now })
          .where(eq(endpoints.id, row.id));
        applied.updated.push(d.name);
      }
    }
    const kept = new Set(names);
    const gone = rows.filter((r) => r.source === 'file' && !kept.has(r.name ?? '') && r.enabled);
    for (const r of gone) {
      await tx
        .update(endpoints)
        .set({ enabled: false, disabledReason: REMOVED_FROM_FILE, updatedAt: now })
        .where(eq(endpoints.id, r.id));
      applied.disabled.push(r.name ?? r.id);
    }
    return applied;
  });
  subscriptionsOf(db).changed();
  return result;
}
