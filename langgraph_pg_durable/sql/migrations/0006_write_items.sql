-- A pending write to a list channel in the delta layout stores its items in
-- channel_items under a write key (see langgraph_pg_durable/lists.py, write_items); its
-- row names that key here, so that a delete knows which items it frees and a read which
-- items it needs. NULL for every other write.
ALTER TABLE {schema}.checkpoint_writes ADD COLUMN IF NOT EXISTS item_version text;
