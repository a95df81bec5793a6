-- A message's customerMessageId and provider id looked up in tables of their own
-- (src/db/schema/message-keys.ts) instead of messages_customer_message_id_unique and
-- messages_provider_message_id_idx. A status move writes a new version of the message's row,
-- and since the status is indexed the update is not HOT: every index of messages takes an
-- entry. With ids in time order those entries land near each other; with random ids (the
-- provider answers GUIDs, clients often send UUIDs) each callback and each dispatched message
-- wrote into a random page of both indexes, which outgrow memory as the table grows: on a
-- million messages, 20 000 status moves after a checkpoint wrote 122-126 MB of WAL against
-- 18.7 MB without the two indexes (docs/performance.md). Here a message costs one entry in
-- each, when it is made and when the provider names it.
--
-- message_customer_ids' key keeps a customerMessageId to one message, as the unique constraint
-- did: a submit claims its keys first in the same statement (ON CONFLICT DO NOTHING); any other
-- insert of a message gets its key from the trigger below, and a key another message holds
-- fails there as the constraint did.
--
-- The provider id is given by the dispatch's update, whose statement also writes its key
-- (src/messages/dispatch-write.ts): a row trigger there would cost a plpgsql call for every
-- message dispatched. The row trigger here moves a key when an id changes otherwise (a
-- customerMessageId, or a provider id that was already set).
--
-- Hand-written: drizzle-kit cannot express triggers. messages is locked first, so no message is
-- made or removed between the copy and the triggers; the keys are built after the copy, by
-- sorting once.
LOCK TABLE "messages" IN SHARE ROW EXCLUSIVE MODE;
--> statement-breakpoint
CREATE TABLE "message_customer_ids" (
	"customer_message_id" text NOT NULL,
	"message_id" uuid NOT NULL
);
--> statement-breakpoint
CREATE TABLE "message_provider_ids" (
	"provider_message_id" text NOT NULL,
	"message_id" uuid NOT NULL
);
--> statement-breakpoint
CREATE FUNCTION "message_keys_track"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO message_customer_ids (customer_message_id, message_id)
      SELECT n.customer_message_id, n.id FROM new_rows n
      WHERE NOT EXISTS (SELECT 1 FROM message_customer_ids k
        WHERE k.customer_message_id = n.customer_message_id AND k.message_id = n.id);
    INSERT INTO message_provider_ids (provider_message_id, message_id)
      SELECT provider_message_id, id FROM new_rows WHERE provider_message_id IS NOT NULL
      ON CONFLICT DO NOTHING;
  ELSIF TG_OP = 'DELETE' THEN
    DELETE FROM message_customer_ids k USING old_rows o
      WHERE k.customer_message_id = o.customer_message_id AND k.message_id = o.id;
    DELETE FROM message_provider_ids k USING old_rows o
      WHERE k.provider_message_id = o.provider_message_id AND k.message_id = o.id;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "message_keys_insert" AFTER INSERT ON "messages"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "message_keys_track"();
--> statement-breakpoint
CREATE TRIGGER "message_keys_delete" AFTER DELETE ON "messages"
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "message_keys_track"();
--> statement-breakpoint
CREATE FUNCTION "message_keys_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.customer_message_id IS DISTINCT FROM NEW.customer_message_id THEN
    UPDATE message_customer_ids SET customer_message_id = NEW.customer_message_id
    WHERE customer_message_id = OLD.customer_message_id AND message_id = OLD.id;
  END IF;
  IF OLD.provider_message_id IS DISTINCT FROM NEW.provider_message_id THEN
    DELETE FROM message_provider_ids
    WHERE provider_message_id = OLD.provider_message_id AND message_id = OLD.id;
    INSERT INTO message_provider_ids (provider_message_id, message_id)
      SELECT NEW.provider_message_id, NEW.id WHERE NEW.provider_message_id IS NOT NULL
      ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- a row trigger on the two columns: status moves set neither and skip it; the dispatch's update
-- sets the provider id, and only where one was set before is the function called
CREATE TRIGGER "message_keys_update" AFTER UPDATE OF "customer_message_id", "provider_message_id"
  ON "messages" FOR EACH ROW
  WHEN (OLD."customer_message_id" IS DISTINCT FROM NEW."customer_message_id"
    OR (OLD."provider_message_id" IS NOT NULL
      AND OLD."provider_message_id" IS DISTINCT FROM NEW."provider_message_id"))
  EXECUTE FUNCTION "message_keys_move"();
--> statement-breakpoint
INSERT INTO "message_customer_ids" (customer_message_id, message_id)
  SELECT customer_message_id, id FROM "messages";
--> statement-breakpoint
INSERT INTO "message_provider_ids" (provider_message_id, message_id)
  SELECT provider_message_id, id FROM "messages" WHERE provider_message_id IS NOT NULL;
--> statement-breakpoint
ALTER TABLE "message_customer_ids"
  ADD CONSTRAINT "message_customer_ids_pkey" PRIMARY KEY ("customer_message_id");
--> statement-breakpoint
ALTER TABLE "message_provider_ids" ADD CONSTRAINT
  "message_provider_ids_provider_message_id_message_id_pk" PRIMARY KEY ("provider_message_id", "message_id");
--> statement-breakpoint
ALTER TABLE "messages" DROP CONSTRAINT "messages_customer_message_id_unique";
--> statement-breakpoint
DROP INDEX "messages_provider_message_id_idx";
