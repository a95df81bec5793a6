import type { Logger } from '../logger.ts';

/** What every request carries through the Hono context. */
export interface AppEnv {
  Variables: {
    requestId: string;
    logger: Logger;
  };
}
