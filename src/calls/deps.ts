/** What the call runtime is given: the clock, the flows, and the hooks it tells. */

import type { LimitSettings } from '../campaigns/limits.ts';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/client.ts';
import type { TokenSecret } from '../flows/index.ts';
import type { SpokenPrompts } from '../speech/spoken.ts';
import type { FlowRegistry } from './registry.ts';

export interface RuntimeDeps {
  clock: Clock;
  flows: FlowRegistry;
  maxSmsParts?: number;
  /** told after a commit that queued follow-ups (wakes this instance's dispatcher) */
  onQueued?: () => void;
}

export const CALL_STATES = ['queued', 'accepted', 'in-progress', 'ended', 'failed'] as const;
export type CallState = (typeof CALL_STATES)[number];

/**
 * The states of a call not yet over: the `switchboard_calls` gauge counts these, through the
 * index `calls_state_id_idx`. Ended and failed calls only accumulate, so counting them would
 * read ever more at every scrape.
 */
export const LIVE_CALL_STATES = [
  'queued',
  'accepted',
  'in-progress',
] as const satisfies readonly CallState[];

/** What the events that reach a call from outside need besides the runtime. */
export interface EventDeps extends RuntimeDeps {
  db: Db;
  /** every secret a token may have been signed with (rotation: old calls keep working) */
  verifyingSecrets: TokenSecret[];
}

/** What starting calls needs besides the runtime. */
export interface StartDeps extends RuntimeDeps {
  db: Db;
  /** the newest secret signs every token of new calls */
  signingSecret: TokenSecret;
  /** where the provider posts key webhooks: `${PUBLIC_URL}/hooks/speechcall` */
  hookUrl: string;
  /** `say:` prompts' URLs and rows (src/speech/spoken.ts); unset: a flow may not speak */
  spoken?: SpokenPrompts;
  /** the project's window, holidays and cap, for sends that ask (src/campaigns/limits.ts) */
  limits?: LimitSettings;
}
