-- Lists of messages by type (GET /v1/messages?type=, the console). A list filtered by type
-- walked the messages newest first until it had a page: a type few messages have (flash calls
-- among millions of SMS) read the whole table, more with every message kept. Now the filter
-- walks an index of (type, message id) in the list's order, as the list by phone number walks
-- message_recipients' key (migration 0024). The index is on message_recipients, written once
-- when a message is made, and not on messages: there it would take an entry at every status
-- move as well (those updates are not HOT), which cost 2-8 % more Postgres CPU per callback
-- and per message dispatched when measured (docs/performance.md, "Lists by type").
--
-- The table is made again with the type in it (hand-written: drizzle-kit would add a NOT NULL
-- column to a table with rows): copied from messages, its key and the new index built after
-- the copy by sorting once, the old table dropped. messages is locked first, so no message is
-- made or removed between the copy and the triggers that keep the table from then on.
LOCK TABLE "messages" IN SHARE ROW EXCLUSIVE MODE;
--> statement-breakpoint
ALTER TABLE "message_recipients" RENAME TO "message_recipients_0024";
--> statement-breakpoint
ALTER TABLE "message_recipients_0024"
  RENAME CONSTRAINT "message_recipients_to_message_id_pk" TO "message_recipients_0024_pk";
--> statement-breakpoint
CREATE TABLE "message_recipients" (
	"to" text NOT NULL,
	"message_id" uuid NOT NULL,
	"type" text NOT NULL
);
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "message_recipients_track"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO message_recipients ("to", message_id, type) SELECT "to", id, type FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    DELETE FROM message_recipients r USING old_rows o WHERE r."to" = o."to" AND r.message_id = o.id;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "message_recipients_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE message_recipients SET "to" = NEW."to", type = NEW.type
  WHERE "to" = OLD."to" AND message_id = OLD.id;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- a row trigger on the two columns: the updates that set neither (all of Switchboard's) skip it
DROP TRIGGER "message_recipients_update" ON "messages";
--> statement-breakpoint
CREATE TRIGGER "message_recipients_update" AFTER UPDATE OF "to", "type" ON "messages"
  FOR EACH ROW WHEN (OLD."to" IS DISTINCT FROM NEW."to" OR OLD."type" IS DISTINCT FROM NEW."type")
  EXECUTE FUNCTION "message_recipients_move"();
--> statement-breakpoint
INSERT INTO "message_recipients" ("to", message_id, type) SELECT "to", id, type FROM "messages";
--> statement-breakpoint
ALTER TABLE "message_recipients"
  ADD CONSTRAINT "message_recipients_to_message_id_pk" PRIMARY KEY ("to", "message_id");
--> statement-breakpoint
CREATE INDEX "message_recipients_type_message_id_idx" ON "message_recipients" USING btree ("type","message_id");
--> statement-breakpoint
DROP TABLE "message_recipients_0024";
