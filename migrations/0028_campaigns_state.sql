-- The campaigns by state: the scheduler's every round asks for the uploading, scheduled and
-- running ones, and GET /v1/campaigns?state= pages one state newest first; each read every
-- campaign ever made. (state, id) hands out the live few, however many are done. Small table:
-- the build holds writes to it for moments.
CREATE INDEX "campaigns_state_id_idx" ON "campaigns" USING btree ("state","id");