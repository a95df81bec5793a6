CREATE TABLE "message_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"message_id" uuid NOT NULL,
	"status" text NOT NULL,
	"source" text NOT NULL,
	"detail" jsonb,
	"at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"id" uuid PRIMARY KEY NOT NULL,
	"customer_message_id" text NOT NULL,
	"provider_message_id" text,
	"messagelist_id" bigint,
	"type" text NOT NULL,
	"from" text NOT NULL,
	"to" text NOT NULL,
	"payload" jsonb NOT NULL,
	"status" text NOT NULL,
	"parts" integer,
	"call_id" uuid,
	"role" text,
	"delivered_via" text,
	"error" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "messages_customer_message_id_unique" UNIQUE("customer_message_id")
);
--> statement-breakpoint
ALTER TABLE "message_events" ADD CONSTRAINT "message_events_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "message_events_message_at_idx" ON "message_events" USING btree ("message_id","at","id");--> statement-breakpoint
CREATE INDEX "messages_provider_message_id_idx" ON "messages" USING btree ("provider_message_id");--> statement-breakpoint
CREATE INDEX "messages_to_id_idx" ON "messages" USING btree ("to","id");--> statement-breakpoint
CREATE INDEX "messages_status_id_idx" ON "messages" USING btree ("status","id");--> statement-breakpoint
CREATE INDEX "messages_call_id_idx" ON "messages" USING btree ("call_id","id");