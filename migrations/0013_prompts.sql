CREATE TABLE "prompt_audio" (
	"content_hash" text PRIMARY KEY NOT NULL,
	"public_id" text NOT NULL,
	"ext" text NOT NULL,
	"content_type" text NOT NULL,
	"duration_ms" integer NOT NULL,
	"size_bytes" integer NOT NULL,
	"body" "bytea",
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_used_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "prompt_audio_public_id_key" UNIQUE("public_id")
);
--> statement-breakpoint
CREATE TABLE "prompt_uses" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"request_hash" text NOT NULL,
	"call_id" uuid,
	"content_hash" text NOT NULL,
	"expires_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "prompt_uses_shared_key" ON "prompt_uses" USING btree ("request_hash") WHERE "prompt_uses"."call_id" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "prompt_uses_call_key" ON "prompt_uses" USING btree ("request_hash","call_id") WHERE "prompt_uses"."call_id" is not null;--> statement-breakpoint
CREATE INDEX "prompt_uses_call_id_idx" ON "prompt_uses" USING btree ("call_id");--> statement-breakpoint
CREATE INDEX "prompt_uses_content_hash_idx" ON "prompt_uses" USING btree ("content_hash");--> statement-breakpoint
CREATE INDEX "prompt_uses_expires_at_idx" ON "prompt_uses" USING btree ("expires_at");