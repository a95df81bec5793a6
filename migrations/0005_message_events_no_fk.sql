ALTER TABLE "message_events" DROP CONSTRAINT "message_events_message_id_messages_id_fk";
