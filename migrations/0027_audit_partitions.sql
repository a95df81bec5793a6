-- Day partitions of the audit log (hand-written: drizzle-kit cannot express partitioning; its
-- snapshot holds the table's columns, keys and indexes, which match).
--
-- audit_log gains a row with every request that changes something through the API, so it
-- grows with the traffic, forever until now. It becomes partitioned by RANGE of "at", one
-- partition per UTC day and a default partition, as the other append-only tables are
-- (0017-0019), so that retention (AUDIT_RETENTION_DAYS) drops whole days instead of deleting
-- rows one by one. Its ids stay (audit_log_id_seq), and its primary key becomes (id, at): a
-- partitioned table's unique keys must hold the partition key.
--
-- The filters of GET /v1/audit get an index each, (token, id) and (route, id): a page of one
-- token's or one route's rows, newest first, reads those rows, not every row newer than them.
--
-- The existing rows are copied into the new table, each day's partition made first, and the
-- old table dropped, inside this migration's transaction: nothing is lost.

ALTER TABLE "audit_log" RENAME TO "audit_log_unpartitioned";--> statement-breakpoint
ALTER TABLE "audit_log_unpartitioned" RENAME CONSTRAINT "audit_log_pkey" TO "audit_log_unpartitioned_pkey";--> statement-breakpoint
ALTER INDEX "audit_log_at_idx" RENAME TO "audit_log_unpartitioned_at_idx";--> statement-breakpoint
CREATE TABLE "audit_log" (
	"id" bigint DEFAULT nextval('audit_log_id_seq'::regclass) NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"token" text NOT NULL,
	"method" text NOT NULL,
	"route" text NOT NULL,
	"status" integer NOT NULL,
	"request_id" text NOT NULL,
	"changes" jsonb NOT NULL,
	CONSTRAINT "audit_log_id_at_pk" PRIMARY KEY("id","at")
) PARTITION BY RANGE ("at");--> statement-breakpoint
ALTER SEQUENCE "audit_log_id_seq" OWNED BY "audit_log"."id";--> statement-breakpoint
CREATE INDEX "audit_log_at_idx" ON "audit_log" USING btree ("at","id");--> statement-breakpoint
CREATE INDEX "audit_log_token_idx" ON "audit_log" USING btree ("token","id");--> statement-breakpoint
CREATE INDEX "audit_log_route_idx" ON "audit_log" USING btree ("route","id");--> statement-breakpoint
CREATE TABLE "audit_log_default" PARTITION OF "audit_log" DEFAULT;--> statement-breakpoint
-- a partition for each day that holds rows; other times stay in the default partition
SELECT switchboard_day_partition('audit_log', 'at', d) FROM (
  SELECT DISTINCT switchboard_time_day("at") AS d FROM "audit_log_unpartitioned") days
  WHERE d IS NOT NULL ORDER BY d;--> statement-breakpoint
INSERT INTO "audit_log" ("id", "at", "token", "method", "route", "status", "request_id", "changes")
  SELECT "id", "at", "token", "method", "route", "status", "request_id", "changes"
  FROM "audit_log_unpartitioned";--> statement-breakpoint
DROP TABLE "audit_log_unpartitioned";
