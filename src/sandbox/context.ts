/**
 * What the sandbox's route modules share: its parts, built once by `createSandbox`.
 */
import type { SandboxCredentials } from './auth.ts';
import type { BotRegistry } from './bots.ts';
import type { CallbackOptions, CallbackSender } from './callbacks.ts';
import type { CascadeEngine } from './cascade.ts';
import type { ChatStore } from './chat.ts';
import type { ManualClock, SandboxClock, Scheduler } from './clock.ts';
import type { SandboxDialect } from './dialect.ts';
import type { LifecycleTimings, MessageEngine } from './messages.ts';
import type { RateCategory, TokenBucket } from './rate-limit.ts';
import type { ScriptBook } from './scripts.ts';

export interface InboundViberMessage {
  messageId: string;
  from: string;
  to: string;
  text: string;
  timestamp: string;
  callbackId?: string;
}

/** An injected failure: the next `count` requests whose path ends with `path` get `status`. */
export interface Fault {
  path: string;
  status: 500 | 502 | 503 | 504;
  count: number;
}

export interface FaultBook {
  add(fault: Fault): void;
  /** Takes one failure for `path`, if one is queued. */
  take(path: string): Fault['status'] | undefined;
  list(): Fault[];
  clear(): void;
}

/** A logger as pino's, reduced to what the sandbox calls. */
export interface SandboxLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface SandboxContext {
  /** What the sandbox reports: the provider's docs, or the condensed interface (dialect.ts). */
  dialect: SandboxDialect;
  clock: SandboxClock;
  /** The same clock when tests drive it, for `/_control/clock/advance`. */
  manualClock: ManualClock | undefined;
  scheduler: Scheduler;
  credentials: SandboxCredentials;
  messages: MessageEngine;
  cascade: CascadeEngine;
  bots: BotRegistry;
  chat: ChatStore;
  sender: CallbackSender;
  scripts: ScriptBook;
  buckets: () => Record<RateCategory, TokenBucket>;
  options: {
    get(): CallbackOptions;
    set(patch: Partial<CallbackOptions>): CallbackOptions;
  };
  timings: {
    get(): LifecycleTimings;
    set(patch: Partial<LifecycleTimings>): LifecycleTimings;
  };
  callbackUrl: string | undefined;
  viberCallbackUrl: string | undefined;
  callbackHeaders: Record<string, string>;
  faults: FaultBook;
  inbound: {
    add(message: InboundViberMessage): void;
    list(): InboundViberMessage[];
    /** Forgets the messages `mentions` picks; returns how many. */
    forget(mentions: (message: InboundViberMessage) => boolean): number;
  };
  reset(): void;
  logger?: SandboxLogger;
}
