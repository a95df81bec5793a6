-- psql -d DB -v how=keys -f bench/growth/trials/key-lookups.sql
-- 20 000 messages of every age (the same ones each run) found by customerMessageId and by the
-- provider's id, 100 a statement, as a callback batch finds them (message-lock.ts), reading the
-- row (status): prints buffers hit and read and executor ms summed over the 200 statements.
-- how=keys: through message_customer_ids and message_provider_ids (migration 0030).
-- how=index: through indexes of messages, as before 0030 (made by this script before its runs,
-- dropped after: on a copy of the database, or where nothing else writes).
-- how=covering: as keys, with message_customer_ids' key made to carry message_id too (an
-- index of (customer_message_id) INCLUDE (message_id), made and dropped the same way), so a
-- lookup can skip the key's row where the table's visibility map says all-visible.
\set QUIET on
select set_config('trial.how', :'how', false);
create temp table refs as
  select customer_message_id as cmid, provider_message_id as pmid, row_number() over () as n
  from (select customer_message_id, provider_message_id from messages tablesample system (1) repeatable (42)
        where provider_message_id is not null limit 20000) s;
do $$ begin
  if current_setting('trial.how') = 'index' then
    create index trial_cmid on messages (customer_message_id);
    create index trial_pmid on messages (provider_message_id);
    analyze messages;
  elsif current_setting('trial.how') = 'covering' then
    create unique index trial_cov on message_customer_ids (customer_message_id) include (message_id);
  end if;
end $$;
create temp table res (kind text, hit bigint, rd bigint, ms float8);
do $$
declare plan json; i int; k text; q text;
begin
  foreach k in array array['cmid', 'pmid'] loop
    if current_setting('trial.how') in ('keys', 'covering') and k = 'cmid' then
      q := 'select m.status from refs r cross join lateral (select message_id from message_customer_ids where customer_message_id = r.cmid) x join messages m on m.id = x.message_id';
    elsif current_setting('trial.how') in ('keys', 'covering') then
      q := 'select m.status from refs r cross join lateral (select message_id from message_provider_ids where provider_message_id = r.pmid order by message_id desc limit 1) x join messages m on m.id = x.message_id';
    elsif k = 'cmid' then
      q := 'select m.status from refs r cross join lateral (select status from messages where customer_message_id = r.cmid) m';
    else
      q := 'select m.status from refs r cross join lateral (select status from messages where provider_message_id = r.pmid order by id desc limit 1) m';
    end if;
    for i in 0..199 loop
      execute format('explain (analyze, buffers, format json) %s where r.n > %s and r.n <= %s', q, i*100, i*100+100) into plan;
      insert into res values (k,
        (plan->0->'Plan'->>'Shared Hit Blocks')::bigint,
        (plan->0->'Plan'->>'Shared Read Blocks')::bigint,
        (plan->0->>'Execution Time')::float8);
    end loop;
  end loop;
end $$;
select kind, current_setting('trial.how') as how, sum(hit) as hit, sum(rd) as read,
       round(sum(ms)::numeric) as exec_ms
from res group by kind order by kind;
do $$ begin
  if current_setting('trial.how') = 'index' then
    drop index trial_cmid; drop index trial_pmid;
  elsif current_setting('trial.how') = 'covering' then
    drop index trial_cov;
  end if;
end $$;
