-- Inbox keys that begin with the callback's own time (src/messages/inbox.ts `dedupKey`). The
-- dedup key of a body was its SHA-256 alone: random, so each callback probed and inserted into
-- a random page of inbox_keys' primary key, which outgrows memory (6.5 GB at 20 million
-- messages) and then costs a disk read a callback. A body that carries a date and time now
-- gets a key that begins with those seconds, so keys lie in time order and the pages a
-- callback touches are the index's recent end.
--
-- Keys already stored stay as they are (nothing is rewritten). So that a retry of a callback
-- stored before still finds its key, a body keeps the plain key when its time is before the
-- moment written here: a day after this migration ran (the times in bodies may be written in
-- a zone ahead of UTC, and an instance not yet upgraded keeps writing plain keys until it is).
-- With no key stored yet there is nothing to keep: the new keys start at once. Plain keys go
-- with their bodies, by retention or erasure, as before.
INSERT INTO "settings" ("key", "value")
SELECT 'inbox_keys.timed_since',
  CASE WHEN EXISTS (SELECT 1 FROM "inbox_keys")
    THEN to_char((now() + interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
    ELSE '1970-01-01T00:00:00Z'
  END
ON CONFLICT ("key") DO NOTHING;
