-- The statement trigger that gives inserted messages their customerMessageId keys (migration
-- 0030) looks for each message's key one by one, through the key's index (a lateral subquery
-- with LIMIT 1, which the planner cannot turn into a hash join). Written as NOT EXISTS, its
-- plan, made once per session for the first statement that fired it, could be a hash anti join
-- that read all of message_customer_ids: a session that first stored 50 calls at once kept
-- that plan for the single follow-ups after it, and on a table of ~100 pages each one cost
-- 1.9 ms (docs/performance.md, "The keys' trigger reads the whole table").
--
-- Hand-written: drizzle-kit cannot express functions. Only the function's body changes.
CREATE OR REPLACE FUNCTION "message_keys_track"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO message_customer_ids (customer_message_id, message_id)
      SELECT n.customer_message_id, n.id FROM new_rows n
      LEFT JOIN LATERAL (SELECT 1 AS present FROM message_customer_ids k
        WHERE k.customer_message_id = n.customer_message_id AND k.message_id = n.id
        LIMIT 1) k ON true
      WHERE k.present IS NULL;
    INSERT INTO message_provider_ids (provider_message_id, message_id)
      SELECT provider_message_id, id FROM new_rows WHERE provider_message_id IS NOT NULL
      ON CONFLICT DO NOTHING;
  ELSIF TG_OP = 'DELETE' THEN
    DELETE FROM message_customer_ids k USING old_rows o
      WHERE k.customer_message_id = o.customer_message_id AND k.message_id = o.id;
    DELETE FROM message_provider_ids k USING old_rows o
      WHERE k.provider_message_id = o.provider_message_id AND k.message_id = o.id;
  END IF;
  RETURN NULL;
END
$$;
