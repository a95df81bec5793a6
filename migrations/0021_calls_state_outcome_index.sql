-- Lists of calls by state and by outcome (GET /v1/calls?state=&outcome=, the console), and
-- the switchboard_calls gauge. A list filtered by state or outcome walked the calls newest
-- first until it had a page: a rare state (failed) or outcome read the whole table, more with
-- every call ever made. Now each filter walks its own index, (state, id) and (outcome, id), in
-- the list's order. The first replaces 0020's partial index of the live states, whose gauge it
-- answers as well (a range of the index per live state): the one index costs a call an entry
-- more when it ends, where two would cost each state change two. Outcomes are indexed only
-- once set (when a call ends).
-- Building them reads the table once, under a lock that holds back writes to calls meanwhile.
DROP INDEX "calls_live_state_idx";--> statement-breakpoint
CREATE INDEX "calls_state_id_idx" ON "calls" USING btree ("state","id");--> statement-breakpoint
CREATE INDEX "calls_outcome_id_idx" ON "calls" USING btree ("outcome","id") WHERE "calls"."outcome" is not null;
