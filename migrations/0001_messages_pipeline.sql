CREATE TABLE "inbound_messages" (
	"id" uuid PRIMARY KEY NOT NULL,
	"inbox_id" bigint NOT NULL,
	"channel" text DEFAULT 'viber' NOT NULL,
	"from" text NOT NULL,
	"to" text,
	"text" text,
	"provider_message_id" text,
	"data" jsonb,
	"at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "inbox" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"dedup_key" text NOT NULL,
	"content_type" text,
	"body" text,
	"outcome" jsonb,
	"pending" integer DEFAULT 0 NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "outbox" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"message_id" uuid NOT NULL,
	"available_at" timestamp with time zone DEFAULT now() NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "outbox_message_id_unique" UNIQUE("message_id")
);
--> statement-breakpoint
CREATE TABLE "pending_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"inbox_id" bigint NOT NULL,
	"customer_message_id" text,
	"provider_message_id" text,
	"status" text NOT NULL,
	"detail" jsonb,
	"at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "last_polled_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "inbound_messages" ADD CONSTRAINT "inbound_messages_inbox_id_inbox_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inbox"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "outbox" ADD CONSTRAINT "outbox_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "pending_events" ADD CONSTRAINT "pending_events_inbox_id_inbox_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inbox"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "inbound_from_id_idx" ON "inbound_messages" USING btree ("from","id");--> statement-breakpoint
CREATE INDEX "inbound_at_idx" ON "inbound_messages" USING btree ("at");--> statement-breakpoint
CREATE UNIQUE INDEX "inbox_dedup_idx" ON "inbox" USING btree ("dedup_key");--> statement-breakpoint
CREATE INDEX "inbox_kind_received_idx" ON "inbox" USING btree ("kind","received_at");--> statement-breakpoint
CREATE INDEX "outbox_available_idx" ON "outbox" USING btree ("available_at","id");--> statement-breakpoint
CREATE INDEX "pending_events_cmid_idx" ON "pending_events" USING btree ("customer_message_id");--> statement-breakpoint
CREATE INDEX "pending_events_pmid_idx" ON "pending_events" USING btree ("provider_message_id");