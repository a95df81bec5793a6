-- Time partitions for the append-only timelines (hand-written: drizzle-kit cannot express
-- partitioning; its snapshot holds the tables' columns, keys and indexes, which match).
--
-- message_events and call_events become partitioned by RANGE of their parent's id: a UUIDv7,
-- whose first 48 bits are the millisecond it was made, so a range of ids is a span of time.
-- One partition per UTC day (`<table>_pYYYYMMDD`, as pg_partman names them), and a default
-- partition for ids outside every day made. A read by message or call id (every timeline
-- read) touches one partition; retention drops a whole day at once (src/db/partitions.ts).
--
-- The existing rows are copied into the new tables, each day's partition made first, and the
-- old tables dropped: nothing is lost, and a large table takes its copying time (about what
-- a CREATE TABLE AS of it takes) inside this migration's transaction.

-- The smallest UUIDv7 of an instant: every id made from then on sorts at or above it.
CREATE FUNCTION "switchboard_uuidv7_floor"(at timestamptz) RETURNS uuid
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ select (lpad(to_hex(floor(extract(epoch from at) * 1000)::bigint), 12, '0')
    || '00000000000000000000')::uuid $$;--> statement-breakpoint

-- The UTC day a UUIDv7 was made on; null for an id of another version, or of a time before
-- 2020 or over a year ahead (not made by Switchboard: such rows stay in the default partition).
CREATE FUNCTION "switchboard_uuidv7_day"(id uuid) RETURNS date
  LANGUAGE sql STABLE STRICT PARALLEL SAFE
  AS $$ select d from (select (to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)
    AT TIME ZONE 'UTC')::date as d where substr(id::text, 15, 1) = '7') v
    where d between date '2020-01-01' and current_date + 366 $$;--> statement-breakpoint

-- The day partition of `parent` (partitioned by `key`, a UUIDv7) for `day` (UTC), made when
-- missing; its name, or null when it was there. Rows of that day that reached the default
-- partition meanwhile move into it (Postgres refuses a new partition while the default holds
-- rows of its range). The one definition of a day partition: the server's maintenance
-- (src/db/partitions.ts) calls it too.
CREATE FUNCTION "switchboard_day_partition"(parent text, key text, day date) RETURNS text
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
  EXECUTE format('CREATE TEMP TABLE switchboard_moving AS SELECT * FROM %I WHERE %I >= %L AND %I < %L',
    parent || '_default', key, lo, key, hi);
  GET DIAGNOSTICS moved = ROW_COUNT;
  IF moved > 0 THEN
    EXECUTE format('DELETE FROM %I WHERE %I >= %L AND %I < %L', parent || '_default', key, lo, key, hi);
  END IF;
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', part, parent, lo, hi);
  IF moved > 0 THEN
    EXECUTE format('INSERT INTO %I SELECT * FROM switchboard_moving', parent);
  END IF;
  DROP TABLE switchboard_moving;
  RETURN part;
END $$;--> statement-breakpoint

-- message_events
ALTER TABLE "message_events" RENAME TO "message_events_unpartitioned";--> statement-breakpoint
ALTER INDEX "message_events_message_at_idx" RENAME TO "message_events_unpartitioned_message_at_idx";--> statement-breakpoint
CREATE TABLE "message_events" (
	"id" bigint DEFAULT nextval('message_events_id_seq'::regclass) NOT NULL,
	"message_id" uuid NOT NULL,
	"status" text NOT NULL,
	"source" text NOT NULL,
	"detail" jsonb,
	"at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "message_events_id_message_id_pk" PRIMARY KEY("id","message_id")
) PARTITION BY RANGE ("message_id");--> statement-breakpoint
ALTER SEQUENCE "message_events_id_seq" OWNED BY "message_events"."id";--> statement-breakpoint
CREATE INDEX "message_events_message_at_idx" ON "message_events" USING btree ("message_id","at","id");--> statement-breakpoint
CREATE TABLE "message_events_default" PARTITION OF "message_events" DEFAULT;--> statement-breakpoint
-- a partition for each day that holds events; other ids stay in the default partition
SELECT switchboard_day_partition('message_events', 'message_id', d) FROM (
  SELECT DISTINCT switchboard_uuidv7_day(message_id) AS d FROM "message_events_unpartitioned") days
  WHERE d IS NOT NULL ORDER BY d;--> statement-breakpoint
INSERT INTO "message_events" SELECT "id", "message_id", "status", "source", "detail", "at", "received_at" FROM "message_events_unpartitioned";--> statement-breakpoint
DROP TABLE "message_events_unpartitioned";--> statement-breakpoint

-- call_events
ALTER TABLE "call_events" RENAME TO "call_events_unpartitioned";--> statement-breakpoint
ALTER INDEX "call_events_call_idx" RENAME TO "call_events_unpartitioned_call_idx";--> statement-breakpoint
CREATE TABLE "call_events" (
	"id" bigint DEFAULT nextval('call_events_id_seq'::regclass) NOT NULL,
	"call_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"node" text,
	"menu" text,
	"attempt" integer,
	"key" text,
	"detail" jsonb,
	"at" timestamp with time zone NOT NULL,
	CONSTRAINT "call_events_id_call_id_pk" PRIMARY KEY("id","call_id")
) PARTITION BY RANGE ("call_id");--> statement-breakpoint
ALTER SEQUENCE "call_events_id_seq" OWNED BY "call_events"."id";--> statement-breakpoint
ALTER TABLE "call_events" ADD CONSTRAINT "call_events_call_id_calls_id_fk" FOREIGN KEY ("call_id") REFERENCES "public"."calls"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "call_events_call_idx" ON "call_events" USING btree ("call_id","id");--> statement-breakpoint
CREATE TABLE "call_events_default" PARTITION OF "call_events" DEFAULT;--> statement-breakpoint
SELECT switchboard_day_partition('call_events', 'call_id', d) FROM (
  SELECT DISTINCT switchboard_uuidv7_day(call_id) AS d FROM "call_events_unpartitioned") days
  WHERE d IS NOT NULL ORDER BY d;--> statement-breakpoint
INSERT INTO "call_events" SELECT "id", "call_id", "kind", "node", "menu", "attempt", "key", "detail", "at" FROM "call_events_unpartitioned";--> statement-breakpoint
DROP TABLE "call_events_unpartitioned";
