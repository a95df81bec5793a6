-- psql -d DB -v keys=1 -v base=0 -f bench/growth/trials/dispatch-answers.sql (keys=0 before
-- migration 0030; base: a different number each round, so each round gives new messages)
-- 20 000 new messages given a provider GUID as the dispatch gives them, 100 a statement, after a
-- CHECKPOINT; EXPLAIN (ANALYZE, BUFFERS, WAL) summed. :keys = 1 also writes the provider ids'
-- keys in the same statement, as a CTE, as the dispatch's does since migration 0030.
\set QUIET on
create temp table fresh as
select ('01900000-0000-7000-9000-' || lpad(to_hex(i + :base), 12, '0'))::uuid as id,
       row_number() over () as n from generate_series(1::bigint, 20000::bigint) i;
insert into messages (id, customer_message_id, type, "from", "to", payload, status, created_at, updated_at)
select id, gen_random_uuid()::text, 'sms', 'Bench', '+380501234567', '{"type":"sms","text":"Your order is on its way"}', 'queued', now(), now() from fresh;
select set_config('km.keys', :'keys', false);
checkpoint;
create temp table res (wal bigint, fpi bigint, ms float8);
do $$
declare plan json; i int;
begin
  for i in 0..199 loop
    if current_setting('km.keys') = '1' then
      execute format($q$explain (analyze, buffers, wal, format json)
        with u as (update messages m set provider_message_id = gen_random_uuid()::text,
               status = 'accepted', messagelist_id = 7, parts = 1, updated_at = now()
               from fresh f where m.id = f.id and f.n > %s and f.n <= %s
               returning m.id, m.provider_message_id as pmid)
        insert into message_provider_ids (provider_message_id, message_id)
        select pmid, id from u on conflict do nothing$q$, i*100, i*100+100) into plan;
    else
      execute format($q$explain (analyze, buffers, wal, format json)
        update messages m set provider_message_id = gen_random_uuid()::text, status = 'accepted',
               messagelist_id = 7, parts = 1, updated_at = now()
        from fresh f where m.id = f.id and f.n > %s and f.n <= %s$q$, i*100, i*100+100) into plan;
    end if;
    insert into res values ((plan->0->'Plan'->>'WAL Bytes')::bigint,
      (plan->0->'Plan'->>'WAL FPI')::bigint, (plan->0->>'Execution Time')::float8);
  end loop;
end $$;
select round(sum(wal)/1e6, 1) as wal_mb, sum(fpi) as fpi, round(sum(ms)::numeric) as exec_ms from res;
