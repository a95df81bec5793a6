import type { Logger } from '../logger.ts';
import type { Principal } from './api-tokens.ts';
import type { AuditChanges } from './audit.ts';
import type { IdempotencySlot } from './idempotency.ts';
import type { RouteScope } from './scopes.ts';

/** What every request carries through the Hono context. */
export interface AppEnv {
  Variables: {
    requestId: string;
    logger: Logger;
    /** who the API auth let in (src/http/api-auth.ts); unset when it refused or did not ask */
    principal?: Principal;
    /** the /v1 route the request is for, with its scope; unset for any other path */
    apiRoute?: RouteScope;
    /** what a changing handler did, for its audit row (src/http/audit.ts) */
    audit?: AuditChanges;
    /** set when the request holds an Idempotency-Key: keeps its answer (src/http/idempotency.ts) */
    idempotency?: IdempotencySlot;
  };
}
