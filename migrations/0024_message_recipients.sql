-- A message's phone number looked up in a table of its own (src/db/schema/message-recipients.ts)
-- instead of the index messages_to_id_idx. A status move writes a new version of the message's
-- row, and since the status is indexed the update is not HOT: every index of messages takes an
-- entry. All of them are in time order but the one by phone, so the dispatcher's update and
-- each callback's wrote into a random page of it, which outgrows memory as the table grows
-- (docs/performance.md, "The phone number in a table of its own"). Here a message costs one
-- entry, when it is made.
--
-- Triggers keep the table (hand-written: drizzle-kit cannot express triggers), so every way a
-- message is inserted or deleted keeps it, whatever statement does it. Nothing updates a
-- message's number; should something, the row trigger moves its entry. Existing messages are
-- copied once, here, before the index goes.
CREATE TABLE "message_recipients" (
	"to" text NOT NULL,
	"message_id" uuid NOT NULL
);
--> statement-breakpoint
CREATE FUNCTION "message_recipients_track"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO message_recipients ("to", message_id) SELECT "to", id FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    DELETE FROM message_recipients r USING old_rows o WHERE r."to" = o."to" AND r.message_id = o.id;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "message_recipients_insert" AFTER INSERT ON "messages"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "message_recipients_track"();
--> statement-breakpoint
CREATE TRIGGER "message_recipients_delete" AFTER DELETE ON "messages"
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "message_recipients_track"();
--> statement-breakpoint
-- a row trigger on the column: the updates that do not set "to" (all of Switchboard's) skip it
CREATE FUNCTION "message_recipients_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE message_recipients SET "to" = NEW."to" WHERE "to" = OLD."to" AND message_id = OLD.id;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "message_recipients_update" AFTER UPDATE OF "to" ON "messages"
  FOR EACH ROW WHEN (OLD."to" IS DISTINCT FROM NEW."to") EXECUTE FUNCTION "message_recipients_move"();
--> statement-breakpoint
INSERT INTO "message_recipients" ("to", message_id) SELECT "to", id FROM "messages";
--> statement-breakpoint
-- the key after the copy: built by sorting once, not entry by entry
ALTER TABLE "message_recipients"
  ADD CONSTRAINT "message_recipients_to_message_id_pk" PRIMARY KEY ("to", "message_id");
--> statement-breakpoint
DROP INDEX "messages_to_id_idx";
