-- Values compress with lz4 where the server has it (PostgreSQL 14+ built with lz4):
-- on a growing 200-step thread, pglz compressing each rewritten value cost ~4 ms of
-- the ~6.5 ms a super-step took; lz4 takes a fraction of that for ~50 % more bytes.
-- Rows already stored keep their compression. Without lz4 the default stays.
DO $lz4$
BEGIN
    EXECUTE format('ALTER TABLE %I.channel_values ALTER COLUMN value SET COMPRESSION lz4', {schema_literal});
    EXECUTE format('ALTER TABLE %I.checkpoint_writes ALTER COLUMN value SET COMPRESSION lz4', {schema_literal});
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'lz4 is not available on this server; values keep the default compression';
END
$lz4$;

-- list() of a thread across all its namespaces, newest first: keyset pages walk this
-- index instead of sorting the whole thread for every page.
CREATE INDEX IF NOT EXISTS checkpoints_thread_recent_idx
    ON {schema}.checkpoints (thread_id, checkpoint_id);
