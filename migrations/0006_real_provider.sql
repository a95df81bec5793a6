CREATE TABLE "status_checks" (
	"message_id" uuid PRIMARY KEY NOT NULL,
	"due_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "status_checks" ADD CONSTRAINT "status_checks_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "status_checks_due_idx" ON "status_checks" USING btree ("due_at");--> statement-breakpoint
-- incoming messages stored twice before this migration keep their rows; the later copies lose
-- the provider id the unique index is about
UPDATE "inbound_messages" SET "provider_message_id" = NULL WHERE "id" IN (
  SELECT "id" FROM (
    SELECT "id", row_number() OVER (PARTITION BY "channel", "provider_message_id" ORDER BY "id") AS "n"
    FROM "inbound_messages" WHERE "provider_message_id" IS NOT NULL) "d"
  WHERE "n" > 1);--> statement-breakpoint
CREATE UNIQUE INDEX "inbound_channel_pmid_idx" ON "inbound_messages" USING btree ("channel","provider_message_id") WHERE "inbound_messages"."provider_message_id" is not null;