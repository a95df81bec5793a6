-- A call's phone number looked up in a table of its own (src/db/schema/call-recipients.ts)
-- instead of the index calls_to_id_idx, as migration 0024 did for messages. Every update of a
-- call that is not HOT (its state moves, which calls_state_id_idx holds; a snapshot that no
-- longer fits its page) takes an entry in each index of calls. All of them are in time order
-- or few-valued but the one by phone, so each such update wrote into a random page of it,
-- which outgrows memory as the table grows. Here a call costs one entry, when it is made.
--
-- Triggers keep the table (hand-written: drizzle-kit cannot express triggers), so every way a
-- call is inserted or deleted keeps it, whatever statement does it. Nothing updates a call's
-- number; should something, the row trigger moves its entry. calls is locked first, so no call
-- is made or removed between the copy and the triggers; its key is built after the copy, by
-- sorting once.
LOCK TABLE "calls" IN SHARE ROW EXCLUSIVE MODE;
--> statement-breakpoint
CREATE TABLE "call_recipients" (
	"to" text NOT NULL,
	"call_id" uuid NOT NULL
);
--> statement-breakpoint
CREATE FUNCTION "call_recipients_track"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO call_recipients ("to", call_id) SELECT "to", id FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    DELETE FROM call_recipients r USING old_rows o WHERE r."to" = o."to" AND r.call_id = o.id;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "call_recipients_insert" AFTER INSERT ON "calls"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "call_recipients_track"();
--> statement-breakpoint
CREATE TRIGGER "call_recipients_delete" AFTER DELETE ON "calls"
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "call_recipients_track"();
--> statement-breakpoint
CREATE FUNCTION "call_recipients_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE call_recipients SET "to" = NEW."to" WHERE "to" = OLD."to" AND call_id = OLD.id;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- a row trigger on the column: the updates that do not set "to" (all of Switchboard's) skip it
CREATE TRIGGER "call_recipients_update" AFTER UPDATE OF "to" ON "calls"
  FOR EACH ROW WHEN (OLD."to" IS DISTINCT FROM NEW."to") EXECUTE FUNCTION "call_recipients_move"();
--> statement-breakpoint
INSERT INTO "call_recipients" ("to", call_id) SELECT "to", id FROM "calls";
--> statement-breakpoint
ALTER TABLE "call_recipients"
  ADD CONSTRAINT "call_recipients_to_call_id_pk" PRIMARY KEY ("to", "call_id");
--> statement-breakpoint
DROP INDEX "calls_to_id_idx";
