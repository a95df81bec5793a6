CREATE TABLE "campaign_attempts" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"recipient_id" integer NOT NULL,
	"campaign_id" uuid NOT NULL,
	"attempt" integer NOT NULL,
	"call_id" uuid,
	"message_id" uuid,
	"started_at" timestamp with time zone NOT NULL,
	"ended_at" timestamp with time zone,
	"state" text,
	"outcome" text
);
--> statement-breakpoint
CREATE TABLE "campaign_recipients" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"campaign_id" uuid NOT NULL,
	"line" integer NOT NULL,
	"phone" text NOT NULL,
	"vars" jsonb NOT NULL,
	"lang" text,
	"state" text NOT NULL,
	"next_at" timestamp with time zone,
	"attempts" integer DEFAULT 0 NOT NULL,
	"call_id" uuid,
	"best_call_id" uuid,
	"outcome" text,
	"reason" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "campaigns" (
	"id" uuid PRIMARY KEY NOT NULL,
	"name" text,
	"flow_id" text,
	"message" jsonb,
	"from" text NOT NULL,
	"lang" text,
	"state" text NOT NULL,
	"start_at" timestamp with time zone NOT NULL,
	"per_minute" integer NOT NULL,
	"max_concurrent" integer,
	"window" jsonb,
	"retry" jsonb NOT NULL,
	"paced_at" timestamp with time zone NOT NULL,
	"recipients" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "contact_counts" (
	"phone" text NOT NULL,
	"day" date NOT NULL,
	"count" integer NOT NULL,
	CONSTRAINT "contact_counts_phone_day_pk" PRIMARY KEY("phone","day")
);
--> statement-breakpoint
CREATE TABLE "opt_outs" (
	"phone" text PRIMARY KEY NOT NULL,
	"source" text NOT NULL,
	"detail" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "campaign_attempts_recipient_key" ON "campaign_attempts" USING btree ("recipient_id","attempt");--> statement-breakpoint
CREATE INDEX "campaign_attempts_call_id_idx" ON "campaign_attempts" USING btree ("call_id");--> statement-breakpoint
CREATE UNIQUE INDEX "campaign_recipients_phone_key" ON "campaign_recipients" USING btree ("campaign_id","phone");--> statement-breakpoint
CREATE INDEX "campaign_recipients_due_idx" ON "campaign_recipients" USING btree ("next_at") WHERE "campaign_recipients"."state" in ('pending', 'waiting', 'retry');--> statement-breakpoint
CREATE INDEX "campaign_recipients_calling_idx" ON "campaign_recipients" USING btree ("campaign_id") WHERE "campaign_recipients"."state" = 'calling';--> statement-breakpoint
CREATE INDEX "campaign_recipients_call_id_idx" ON "campaign_recipients" USING btree ("call_id");