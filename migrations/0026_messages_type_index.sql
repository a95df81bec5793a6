-- Lists of messages by type (GET /v1/messages?type=, the console). A list filtered by type
-- walked the messages newest first until it had a page: a type few messages have (flash calls
-- among millions of SMS) read the whole table, more with every message kept. Now the filter
-- walks its own index, (type, id), in the list's order, as status and calls' state do
-- (migration 0021). The type never changes, but a status move is not HOT (the status is
-- indexed), so the index takes an entry at each move too: at the end of its type's range,
-- in time order, a page in memory (docs/performance.md, "Lists by type").
-- Building it reads the table once, under a lock that holds back writes to messages meanwhile.
CREATE INDEX "messages_type_id_idx" ON "messages" USING btree ("type","id");
