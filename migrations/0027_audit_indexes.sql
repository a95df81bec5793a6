-- The audit log's filters (GET /v1/audit?token=, ?route=): newest first, a page of one token's
-- or one route's rows used to walk every newer row of the log. An index each, (token, id) and
-- (route, id), hands out that token's or route's rows alone. On a large existing log the build
-- holds writes to it for a while (a few seconds a million rows).
CREATE INDEX "audit_log_token_idx" ON "audit_log" USING btree ("token","id");--> statement-breakpoint
CREATE INDEX "audit_log_route_idx" ON "audit_log" USING btree ("route","id");