-- A million messages with random UUIDs for customerMessageId and the provider id, for the
-- statement trials of docs/performance.md ("The customer and provider ids in tables of their
-- own"). Run against a database migrated by `switchboard migrate`:
--   psql -d DB -f bench/growth/trials/random-ids-seed.sql
\set QUIET on
set synchronous_commit = off;
insert into messages (id, customer_message_id, provider_message_id, type, "from", "to", payload,
                      status, parts, created_at, updated_at)
select ('01900000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid,
       gen_random_uuid()::text, gen_random_uuid()::text, 'sms', 'Bench',
       '+38050' || lpad((i * 7919 % 9999999)::text, 7, '0'),
       jsonb_build_object('from', 'Bench', 'to', '+38050' || lpad((i * 7919 % 9999999)::text, 7, '0'),
         'type', 'sms', 'text', 'Your order ' || i || ' is on its way'),
       'accepted', 1, now() - interval '1 day' + i * interval '50 ms', now()
from generate_series(1::bigint, 1000000::bigint) as i;
vacuum analyze;
