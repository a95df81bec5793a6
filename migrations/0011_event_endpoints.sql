CREATE TABLE "delivery_attempts" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"delivery_id" bigint NOT NULL,
	"event_id" uuid NOT NULL,
	"endpoint_id" text NOT NULL,
	"at" timestamp with time zone NOT NULL,
	"status" text NOT NULL,
	"response_status" integer,
	"response_body" text,
	"duration_ms" integer NOT NULL,
	"error" text,
	"trigger" text DEFAULT 'scheduled' NOT NULL
);
--> statement-breakpoint
CREATE TABLE "endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text,
	"url" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"event_types" text[],
	"enabled" boolean DEFAULT true NOT NULL,
	"rate_limit" integer,
	"ordered" boolean DEFAULT false NOT NULL,
	"source" text DEFAULT 'api' NOT NULL,
	"secrets" jsonb NOT NULL,
	"failing_since" timestamp with time zone,
	"disabled_reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "event_deliveries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"event_id" uuid NOT NULL,
	"endpoint_id" text NOT NULL,
	"subject" text NOT NULL,
	"state" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_attempt_at" timestamp with time zone,
	"delivered_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "outgoing_events" (
	"id" uuid PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"subject" text NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "delivery_attempts" ADD CONSTRAINT "delivery_attempts_delivery_id_event_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."event_deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "event_deliveries" ADD CONSTRAINT "event_deliveries_event_id_outgoing_events_id_fk" FOREIGN KEY ("event_id") REFERENCES "public"."outgoing_events"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "event_deliveries" ADD CONSTRAINT "event_deliveries_endpoint_id_endpoints_id_fk" FOREIGN KEY ("endpoint_id") REFERENCES "public"."endpoints"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "delivery_attempts_endpoint_idx" ON "delivery_attempts" USING btree ("endpoint_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "endpoints_name_idx" ON "endpoints" USING btree ("name") WHERE name is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "event_deliveries_event_endpoint_idx" ON "event_deliveries" USING btree ("event_id","endpoint_id");--> statement-breakpoint
CREATE INDEX "event_deliveries_due_idx" ON "event_deliveries" USING btree ("next_at","id") WHERE state = 'pending';--> statement-breakpoint
CREATE INDEX "event_deliveries_subject_idx" ON "event_deliveries" USING btree ("endpoint_id","subject","id") WHERE state = 'pending';--> statement-breakpoint
CREATE INDEX "event_deliveries_endpoint_idx" ON "event_deliveries" USING btree ("endpoint_id","id");--> statement-breakpoint
CREATE INDEX "outgoing_events_created_idx" ON "outgoing_events" USING btree ("created_at");--> statement-breakpoint
-- hand-written (drizzle-kit does not model triggers): a statement that queues deliveries
-- notifies the delivery workers, at its commit, so they send at once rather than at their
-- next poll (src/events/deliver.ts, src/workers.ts)
CREATE FUNCTION "switchboard_deliveries_queued"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('switchboard_deliveries', '');
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "event_deliveries_queued" AFTER INSERT ON "event_deliveries" FOR EACH STATEMENT EXECUTE FUNCTION "switchboard_deliveries_queued"();--> statement-breakpoint
-- and a change to which endpoints want which events tells every instance to read them again
-- (src/events/subscriptions.ts), instead of within its periodic refresh
CREATE FUNCTION "switchboard_endpoints_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('switchboard_endpoints', '');
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "endpoints_changed" AFTER INSERT OR DELETE OR UPDATE OF "enabled", "event_types", "name" ON "endpoints" FOR EACH STATEMENT EXECUTE FUNCTION "switchboard_endpoints_changed"();
