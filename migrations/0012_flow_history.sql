-- hand-edited: comments only. Counters per version and language: rows counted before this
-- migration keep version '' and lang '' (unknown), and the unique key takes both columns.
-- Code from before 0012 upserts on the old key, which is gone: stop every instance to upgrade.
DROP INDEX "flow_stats_pk";--> statement-breakpoint
ALTER TABLE "flow_stats" ADD COLUMN "version" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "flow_stats" ADD COLUMN "lang" text DEFAULT '' NOT NULL;--> statement-breakpoint
-- the file's text each version was compiled from (null for versions pinned before)
ALTER TABLE "flow_versions" ADD COLUMN "source" text;--> statement-breakpoint
CREATE UNIQUE INDEX "flow_stats_pk" ON "flow_stats" USING btree ("flow_id","version","lang","metric","subject","key");
