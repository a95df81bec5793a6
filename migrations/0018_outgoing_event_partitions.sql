-- Day partitions of the events for the user's endpoints (hand-written but for the first and
-- last statements: drizzle-kit cannot express partitioning; its snapshot holds the table's
-- columns, key and index, which match).
--
-- outgoing_events becomes partitioned by RANGE of its own id, a UUIDv7 of the event's time
-- (src/events/record.ts), one partition per UTC day and a default partition, as migration 0017
-- did for the timelines: the primary key (id) holds the partition key, so it stays. Retention
-- drops a whole day once none of its deliveries is pending (src/db/partitions.ts).
--
-- The foreign key from event_deliveries to outgoing_events goes, and is not made again: with
-- it, a day could only go by DETACH PARTITION, which holds the table's lock while Postgres
-- checks every event of the day against the deliveries (some 5 us an event: seconds for a big
-- day, during which every transaction that records an event waits). Integrity is the
-- application's: deliveries are written with their events, and what deletes events deletes
-- their deliveries in the same transaction (src/db/schema/endpoints.ts). A delivery's lookup
-- by event keeps its index: event_deliveries_event_endpoint_idx (event_id, endpoint_id).
--
-- The existing rows are copied into the new table, each day's partition made first, and the
-- old table dropped: nothing is lost, and the copy takes about what a CREATE TABLE AS of it
-- takes, inside this migration's transaction.

-- The day partition, as in 0017, but for one change: rows waiting in the default partition
-- are moved with one DELETE ... RETURNING, so a row written between a copy and the delete
-- cannot be deleted without being copied.
CREATE OR REPLACE FUNCTION "switchboard_day_partition"(parent text, key text, day date) RETURNS text
  LANGUAGE plpgsql
  AS $$
DECLARE
  lo uuid := switchboard_uuidv7_floor(day::timestamp AT TIME ZONE 'UTC');
  hi uuid := switchboard_uuidv7_floor((day + 1)::timestamp AT TIME ZONE 'UTC');
  part text := parent || '_p' || to_char(day, 'YYYYMMDD');
  moved bigint;
BEGIN
  -- one maker at a time, whichever instance: the second finds the partition made
  PERFORM pg_advisory_xact_lock(6029315);
  IF to_regclass(format('%I', part)) IS NOT NULL THEN
    RETURN NULL;
  END IF;
  EXECUTE format('CREATE TEMP TABLE switchboard_moving (LIKE %I)', parent);
  EXECUTE format('WITH gone AS (DELETE FROM %I WHERE %I >= %L AND %I < %L RETURNING *) '
    'INSERT INTO switchboard_moving SELECT * FROM gone', parent || '_default', key, lo, key, hi);
  GET DIAGNOSTICS moved = ROW_COUNT;
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', part, parent, lo, hi);
  IF moved > 0 THEN
    EXECUTE format('INSERT INTO %I SELECT * FROM switchboard_moving', parent);
  END IF;
  DROP TABLE switchboard_moving;
  RETURN part;
END $$;--> statement-breakpoint

ALTER TABLE "event_deliveries" DROP CONSTRAINT "event_deliveries_event_id_outgoing_events_id_fk";--> statement-breakpoint
ALTER TABLE "outgoing_events" RENAME TO "outgoing_events_unpartitioned";--> statement-breakpoint
ALTER TABLE "outgoing_events_unpartitioned" RENAME CONSTRAINT "outgoing_events_pkey" TO "outgoing_events_unpartitioned_pkey";--> statement-breakpoint
ALTER INDEX "outgoing_events_created_idx" RENAME TO "outgoing_events_unpartitioned_created_idx";--> statement-breakpoint
CREATE TABLE "outgoing_events" (
	"id" uuid PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"subject" text NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
) PARTITION BY RANGE ("id");--> statement-breakpoint
CREATE INDEX "outgoing_events_created_idx" ON "outgoing_events" USING btree ("created_at");--> statement-breakpoint
CREATE TABLE "outgoing_events_default" PARTITION OF "outgoing_events" DEFAULT;--> statement-breakpoint
-- a partition for each day that holds events; other ids stay in the default partition
SELECT switchboard_day_partition('outgoing_events', 'id', d) FROM (
  SELECT DISTINCT switchboard_uuidv7_day(id) AS d FROM "outgoing_events_unpartitioned") days
  WHERE d IS NOT NULL ORDER BY d;--> statement-breakpoint
INSERT INTO "outgoing_events" SELECT "id", "type", "subject", "data", "created_at" FROM "outgoing_events_unpartitioned";--> statement-breakpoint
DROP TABLE "outgoing_events_unpartitioned";--> statement-breakpoint
CREATE INDEX "delivery_attempts_delivery_idx" ON "delivery_attempts" USING btree ("delivery_id");
