DROP INDEX "campaign_recipients_calling_idx";--> statement-breakpoint
ALTER TABLE "campaign_recipients" ADD COLUMN "message_id" uuid;--> statement-breakpoint
ALTER TABLE "campaign_recipients" ADD COLUMN "best_message_id" uuid;--> statement-breakpoint
CREATE INDEX "campaign_recipients_message_id_idx" ON "campaign_recipients" USING btree ("message_id");--> statement-breakpoint
CREATE INDEX "campaign_recipients_calling_idx" ON "campaign_recipients" USING btree ("campaign_id") WHERE "campaign_recipients"."state" in ('calling', 'sending');