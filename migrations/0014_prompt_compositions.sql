CREATE TABLE "prompt_compositions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"composition_hash" text NOT NULL,
	"public_id" text NOT NULL,
	"call_id" uuid,
	"lang" text NOT NULL,
	"voice" text,
	"rate" double precision,
	"pieces" jsonb NOT NULL,
	"ext" text NOT NULL,
	"content_type" text NOT NULL,
	"parts" jsonb,
	"duration_ms" integer,
	"rendered_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "prompt_compositions_shared_key" ON "prompt_compositions" USING btree ("composition_hash") WHERE "prompt_compositions"."call_id" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "prompt_compositions_call_key" ON "prompt_compositions" USING btree ("composition_hash","call_id") WHERE "prompt_compositions"."call_id" is not null;--> statement-breakpoint
CREATE INDEX "prompt_compositions_public_id_idx" ON "prompt_compositions" USING btree ("public_id");--> statement-breakpoint
CREATE INDEX "prompt_compositions_call_id_idx" ON "prompt_compositions" USING btree ("call_id");--> statement-breakpoint
CREATE INDEX "prompt_compositions_pending_idx" ON "prompt_compositions" USING btree ("call_id") WHERE "prompt_compositions"."rendered_at" is null;