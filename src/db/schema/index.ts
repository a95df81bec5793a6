export * from './message-events.ts';
export * from './messages.ts';
