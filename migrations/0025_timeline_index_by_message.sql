-- A message's timeline found through an index on message_id alone instead of (message_id, at,
-- id) (src/db/schema/message-events.ts). The index serves every read of message_events, each by
-- message_id equality (a message's timeline, the poller's latest word per channel, an
-- erasure's delete); a message has a handful of events, which the read sorts itself. On one
-- column Postgres's B-tree deduplication keeps a single key for all of a message's events, and
-- the index is several times smaller (13 MB against 47 for a million events; 6-7 GB of the
-- 12.3 GB of message_events' indexes at 20 million messages): less to keep in memory for reads
-- of old messages (docs/performance.md, "The timeline's index by message alone").
--
-- On a partitioned message_events both statements reach every partition, and a partition made
-- later gets the new index from its parent. Writes to message_events wait while the index is
-- built (a third of a second a million events on the bench's machine).
DROP INDEX "message_events_message_at_idx";--> statement-breakpoint
CREATE INDEX "message_events_message_idx" ON "message_events" USING btree ("message_id");