-- Day partitions of the raw callbacks (hand-written: drizzle-kit cannot express partitioning;
-- its snapshot holds the tables' columns, keys and indexes, which match).
--
-- inbox becomes partitioned by RANGE of received_at, one partition per UTC day and a default
-- partition, so retention drops a whole day of bodies at once (src/db/partitions.ts) instead
-- of deleting them row by row. Its ids stay (inbox_id_seq), and its primary key becomes
-- (id, received_at): a partitioned table's unique keys must hold the partition key.
--
-- So the dedup key cannot stay unique in the inbox itself (it would be unique per day only,
-- and a provider's retry arrives on another day): it moves to a table of its own, inbox_keys,
-- not partitioned, one narrow row per body, written in the same statement as the body: the 32
-- bytes of the SHA-256 the inbox holds in hex (half the size, in the table and in the index a
-- lookup probes at random). Every existing body's key is copied into it.
--
-- The foreign keys to inbox.id from pending_events, inbound_messages and held_webhooks go, for
-- the reason migration 0018 gave for the deliveries: with them a day could only go by DETACH,
-- which checks every row of the day under the table's lock. The code that deletes a body
-- deletes the rows that point at it in the same transaction (src/messages/inbox.ts).
-- inbound_messages gets an index on inbox_id for that.
--
-- Its (kind, received_at) index goes: only retention read it, and a day now goes whole.
--
-- The existing rows are copied into the new table, each day's partition made first, and the
-- old table dropped, inside this migration's transaction: nothing is lost.

-- The UTC day of an instant, for a table partitioned by time; null before 2020 or over a year
-- ahead (such rows stay in the default partition), as switchboard_uuidv7_day does for ids.
CREATE FUNCTION "switchboard_time_day"(at timestamptz) RETURNS date
  LANGUAGE sql STABLE STRICT PARALLEL SAFE
  AS $$ select d from (select (at AT TIME ZONE 'UTC')::date as d) v
    where d between date '2020-01-01' and current_date + 366 $$;--> statement-breakpoint

-- The day partition, as in 0018, now for a key of either kind: a UUIDv7 (its first 48 bits
-- are its millisecond) or a timestamptz. The bounds of a time key are written in UTC.
CREATE OR REPLACE FUNCTION "switchboard_day_partition"(parent text, key text, day date) RETURNS text
  LANGUAGE plpgsql
  AS $$
DECLARE
  by_time boolean := (SELECT a.atttypid = 'timestamptz'::regtype FROM pg_attribute a
    WHERE a.attrelid = format('%I', parent)::regclass AND a.attname = key);
  lo text := CASE WHEN by_time THEN to_char(day, 'YYYY-MM-DD') || ' 00:00:00+00'
    ELSE switchboard_uuidv7_floor(day::timestamp AT TIME ZONE 'UTC')::text END;
  hi text := CASE WHEN by_time THEN to_char(day + 1, 'YYYY-MM-DD') || ' 00:00:00+00'
    ELSE switchboard_uuidv7_floor((day + 1)::timestamp AT TIME ZONE 'UTC')::text END;
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

CREATE TABLE "inbox_keys" (
	"dedup_key" bytea PRIMARY KEY NOT NULL,
	"received_at" timestamp with time zone NOT NULL
);--> statement-breakpoint
INSERT INTO "inbox_keys" SELECT decode("dedup_key", 'hex'), "received_at" FROM "inbox";--> statement-breakpoint
CREATE INDEX "inbox_keys_received_idx" ON "inbox_keys" USING btree ("received_at");--> statement-breakpoint
ALTER TABLE "held_webhooks" DROP CONSTRAINT "held_webhooks_inbox_id_inbox_id_fk";--> statement-breakpoint
ALTER TABLE "inbound_messages" DROP CONSTRAINT "inbound_messages_inbox_id_inbox_id_fk";--> statement-breakpoint
ALTER TABLE "pending_events" DROP CONSTRAINT "pending_events_inbox_id_inbox_id_fk";--> statement-breakpoint
CREATE INDEX "inbound_inbox_idx" ON "inbound_messages" USING btree ("inbox_id");--> statement-breakpoint

ALTER TABLE "inbox" RENAME TO "inbox_unpartitioned";--> statement-breakpoint
ALTER TABLE "inbox_unpartitioned" RENAME CONSTRAINT "inbox_pkey" TO "inbox_unpartitioned_pkey";--> statement-breakpoint
ALTER INDEX "inbox_dedup_idx" RENAME TO "inbox_unpartitioned_dedup_idx";--> statement-breakpoint
ALTER INDEX "inbox_kind_received_idx" RENAME TO "inbox_unpartitioned_kind_received_idx";--> statement-breakpoint
CREATE TABLE "inbox" (
	"id" bigint DEFAULT nextval('inbox_id_seq'::regclass) NOT NULL,
	"kind" text NOT NULL,
	"dedup_key" text NOT NULL,
	"content_type" text,
	"body" text,
	"outcome" jsonb,
	"pending" integer DEFAULT 0 NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inbox_id_received_at_pk" PRIMARY KEY("id","received_at")
) PARTITION BY RANGE ("received_at");--> statement-breakpoint
ALTER SEQUENCE "inbox_id_seq" OWNED BY "inbox"."id";--> statement-breakpoint
CREATE TABLE "inbox_default" PARTITION OF "inbox" DEFAULT;--> statement-breakpoint
-- a partition for each day that holds bodies; other times stay in the default partition
SELECT switchboard_day_partition('inbox', 'received_at', d) FROM (
  SELECT DISTINCT switchboard_time_day(received_at) AS d FROM "inbox_unpartitioned") days
  WHERE d IS NOT NULL ORDER BY d;--> statement-breakpoint
INSERT INTO "inbox" ("id", "kind", "dedup_key", "content_type", "body", "outcome", "pending", "received_at")
  SELECT "id", "kind", "dedup_key", "content_type", "body", "outcome", "pending", "received_at"
  FROM "inbox_unpartitioned";--> statement-breakpoint
DROP TABLE "inbox_unpartitioned";
