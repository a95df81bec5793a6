export * from './inbound-messages.ts';
export * from './inbox.ts';
export * from './message-events.ts';
export * from './messages.ts';
export * from './outbox.ts';
export * from './pending-events.ts';
