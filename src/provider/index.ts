/**
 * The provider interface as code: message models and rules, SMS segments, the speechcall
 * menu, and the HTTP clients (messaging, cascade, bot users, chat operators) sharing one
 * transport and one rate limiter.
 *
 * @example
 * import { createProviderClient, createRateLimiter, validateMessage } from './provider/index.ts';
 */
export * from './bots.ts';
export * from './cascade.ts';
export * from './chat.ts';
export * from './client.ts';
export * from './http.ts';
export { addRule, issuesToDetails } from './issues.ts';
export * from './limiter.ts';
export * from './menu.ts';
export * from './message.ts';
export * from './sms.ts';
