-- psql -d DB -v off=0 -f bench/growth/trials/status-moves.sql
-- 20 000 of the newest messages moved as callbacks move them, 100 a statement, after a CHECKPOINT;
-- prints WAL bytes, full-page images and executor ms summed over the 200 statements.
-- :off picks which 20 000 (0 = newest, 20000 = the next)
\set QUIET on
checkpoint;
create temp table tgt as select id, row_number() over (order by id desc) as n from (select id from messages order by id desc offset :off limit 20000) s;
create temp table res (wal bigint, fpi bigint, ms float8);
do $$
declare plan json; i int;
begin
  for i in 0..199 loop
    execute format($q$explain (analyze, buffers, wal, format json)
      update messages m set status = 'delivered', delivered_via = 'sms', updated_at = now()
      where m.id in (select id from tgt where n > %s and n <= %s)$q$, i*100, i*100+100) into plan;
    insert into res values (
      coalesce((plan->0->'Plan'->>'WAL Bytes')::bigint, 0),
      coalesce((plan->0->'Plan'->>'WAL FPI')::bigint, 0),
      (plan->0->>'Execution Time')::float8);
  end loop;
end $$;
select round(sum(wal)/1e6, 1) as wal_mb, sum(fpi) as fpi, round(sum(ms)::numeric) as exec_ms from res;
