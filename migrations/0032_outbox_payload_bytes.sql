-- The outbox row keeps the byte size of its message's payload as the dispatcher sends it
-- (src/db/schema/outbox.ts), so a round's claim fits its list to the byte budget without
-- reading every locked row's payload. Rows waiting at the time of the migration get theirs
-- from their message; the outbox holds only messages not sent yet, so this reads few rows.
-- Hand-edited: drizzle-kit writes the column NOT NULL at once, which a waiting row refuses.
ALTER TABLE "outbox" ADD COLUMN "payload_bytes" integer;--> statement-breakpoint
UPDATE "outbox" AS o SET "payload_bytes" = octet_length(m."payload"::text)
  FROM "messages" AS m WHERE m."id" = o."message_id";--> statement-breakpoint
ALTER TABLE "outbox" ALTER COLUMN "payload_bytes" SET NOT NULL;
