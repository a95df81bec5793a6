/**
 * What reaches a call from outside: speech-call webhooks (speech-webhooks.ts), statuses of
 * its message (status-hooks.ts) and durable timers (timers.ts). Each commits in one
 * transaction with what it changed: the dedup row or event, the decision, its writes.
 */
export type { EventDeps } from './deps.ts';
export { createSpeechWebhooks, type WebhookResult } from './speech-webhooks.ts';
export { callDispatchHook, callStatusHook } from './status-hooks.ts';
export { fireDueTimers, nextTimerAt } from './timers.ts';
