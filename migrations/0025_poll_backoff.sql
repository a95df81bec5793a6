-- How many times the status poller has asked the provider about a message: the wait before the
-- next poll doubles with each, from POLL_EVERY_SECONDS up to POLL_EVERY_MAX_SECONDS
-- (src/messages/poller.ts), so a message the provider has nothing new on, or answers 404 for,
-- is no longer asked every few minutes for the whole of its life. A constant default: Postgres
-- adds the column without rewriting the table. Messages polled before this count as polled
-- once (the poller reads a count of 0 beside a last poll as 1).
ALTER TABLE "messages" ADD COLUMN "poll_count" integer DEFAULT 0 NOT NULL;
