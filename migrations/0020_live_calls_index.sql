-- The calls not over yet, for the switchboard_calls gauge (src/calls/read.ts callsByState).
-- The gauge counted every call by state at each scrape, a read of the whole table that grew
-- with every call ever made (nothing removes ended calls); now it counts the live states
-- only, through this index, which holds only the calls in flight. Its predicate lists
-- LIVE_CALL_STATES (src/calls/deps.ts); test/calls/live-states.test.ts holds the two together.
-- Building it reads the table once, under a lock that holds back writes to calls meanwhile.
CREATE INDEX "calls_live_state_idx" ON "calls" USING btree ("state") WHERE state in ('queued', 'accepted', 'in-progress');
