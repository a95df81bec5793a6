DROP INDEX "messages_call_id_idx";--> statement-breakpoint
CREATE INDEX "messages_call_id_idx" ON "messages" USING btree ("call_id","id") WHERE "messages"."call_id" is not null;