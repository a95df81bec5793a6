CREATE TABLE "call_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"call_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"node" text,
	"menu" text,
	"attempt" integer,
	"key" text,
	"detail" jsonb,
	"at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "call_timers" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"call_id" uuid NOT NULL,
	"timer" text NOT NULL,
	"fire_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "flow_stats" (
	"flow_id" text NOT NULL,
	"metric" text NOT NULL,
	"subject" text NOT NULL,
	"key" text DEFAULT '' NOT NULL,
	"count" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "held_webhooks" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"call_id" uuid NOT NULL,
	"inbox_id" bigint NOT NULL,
	"node" text NOT NULL,
	"key" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "calls" (
	"id" uuid PRIMARY KEY NOT NULL,
	"flow_id" text NOT NULL,
	"flow_version" text NOT NULL,
	"to" text NOT NULL,
	"from" text NOT NULL,
	"lang" text NOT NULL,
	"vars" jsonb NOT NULL,
	"state" text NOT NULL,
	"outcome" text,
	"snapshot" jsonb NOT NULL,
	"message_id" uuid NOT NULL,
	"ended_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "flow_versions" (
	"flow_id" text NOT NULL,
	"version" text NOT NULL,
	"compiled" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "flow_versions_flow_id_version_pk" PRIMARY KEY("flow_id","version")
);
--> statement-breakpoint
ALTER TABLE "call_events" ADD CONSTRAINT "call_events_call_id_calls_id_fk" FOREIGN KEY ("call_id") REFERENCES "public"."calls"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "call_timers" ADD CONSTRAINT "call_timers_call_id_calls_id_fk" FOREIGN KEY ("call_id") REFERENCES "public"."calls"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "held_webhooks" ADD CONSTRAINT "held_webhooks_call_id_calls_id_fk" FOREIGN KEY ("call_id") REFERENCES "public"."calls"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "held_webhooks" ADD CONSTRAINT "held_webhooks_inbox_id_inbox_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inbox"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "call_events_call_idx" ON "call_events" USING btree ("call_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "call_timers_call_timer_idx" ON "call_timers" USING btree ("call_id","timer");--> statement-breakpoint
CREATE INDEX "call_timers_fire_at_idx" ON "call_timers" USING btree ("fire_at");--> statement-breakpoint
CREATE UNIQUE INDEX "flow_stats_pk" ON "flow_stats" USING btree ("flow_id","metric","subject","key");--> statement-breakpoint
CREATE INDEX "held_webhooks_call_idx" ON "held_webhooks" USING btree ("call_id","id");--> statement-breakpoint
CREATE INDEX "calls_flow_id_idx" ON "calls" USING btree ("flow_id","id");--> statement-breakpoint
CREATE INDEX "calls_to_id_idx" ON "calls" USING btree ("to","id");--> statement-breakpoint
CREATE INDEX "calls_message_id_idx" ON "calls" USING btree ("message_id");