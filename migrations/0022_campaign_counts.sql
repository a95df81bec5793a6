-- A campaign's progress (recipients by state, results by outcome, attempts) without reading its
-- recipients: counted by GROUP BY over them, a campaign of a million recipients took 270 ms a
-- read, on every view of it, every list page showing it, and every scheduler round that asked
-- whether it was done.
--
-- campaign_counts holds changes, not totals: each statement that inserts, updates or deletes
-- recipients appends one row per (campaign, state, outcome) it moved, with the recipients and
-- attempts it added (negative: took away). A campaign's counts are the sums of its rows. No
-- row is ever updated in place, so two transactions that move the same campaign's recipients
-- never wait for each other here. The scheduler folds a running campaign's rows into one per
-- group (src/campaigns/counts.ts `compactCounts`), so a read sums a few rows.
--
-- The triggers are the one place that counts (hand-written: drizzle-kit cannot express
-- triggers); test/campaigns/counts.test.ts holds their sums to a GROUP BY over the recipients
-- after random statements of every kind. Existing recipients are counted once, here.
CREATE TABLE "campaign_counts" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"campaign_id" uuid NOT NULL,
	"state" text NOT NULL,
	"outcome" text,
	"n" integer NOT NULL,
	"attempts" integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX "campaign_counts_campaign_id_idx" ON "campaign_counts" USING btree ("campaign_id");
--> statement-breakpoint
CREATE FUNCTION "campaign_counts_track"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO campaign_counts (campaign_id, state, outcome, n, attempts)
    SELECT campaign_id, state, outcome, count(*), sum(attempts)
    FROM new_rows GROUP BY campaign_id, state, outcome;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO campaign_counts (campaign_id, state, outcome, n, attempts)
    SELECT campaign_id, state, outcome, -count(*), -sum(attempts)
    FROM old_rows GROUP BY campaign_id, state, outcome;
  ELSE
    -- what each group gained less what it lost; a statement that moved nothing counted (a
    -- recipient's next_at, say) appends nothing
    INSERT INTO campaign_counts (campaign_id, state, outcome, n, attempts)
    SELECT campaign_id, state, outcome, sum(n), sum(attempts)
    FROM (
      SELECT campaign_id, state, outcome, 1 AS n, attempts FROM new_rows
      UNION ALL
      SELECT campaign_id, state, outcome, -1, -attempts FROM old_rows
    ) d
    GROUP BY campaign_id, state, outcome
    HAVING sum(n) <> 0 OR sum(attempts) <> 0;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "campaign_counts_insert" AFTER INSERT ON "campaign_recipients"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "campaign_counts_track"();
--> statement-breakpoint
CREATE TRIGGER "campaign_counts_update" AFTER UPDATE ON "campaign_recipients"
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "campaign_counts_track"();
--> statement-breakpoint
CREATE TRIGGER "campaign_counts_delete" AFTER DELETE ON "campaign_recipients"
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "campaign_counts_track"();
--> statement-breakpoint
INSERT INTO "campaign_counts" (campaign_id, state, outcome, n, attempts)
SELECT campaign_id, state, outcome, count(*), sum(attempts)
FROM campaign_recipients GROUP BY campaign_id, state, outcome;
