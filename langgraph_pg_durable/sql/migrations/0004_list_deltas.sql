-- List channels in the delta layout (see langgraph_pg_durable/lists.py): each item once
-- per thread in channel_items, under the version that introduced it; a list version's
-- row in channel_values names the rows it extends (list_chain, snapshot first) and the
-- versions whose items its segments use (item_versions). Both are NULL for other values.
ALTER TABLE {schema}.channel_values
    ADD COLUMN IF NOT EXISTS list_chain    text[],
    ADD COLUMN IF NOT EXISTS item_versions text[];

CREATE TABLE IF NOT EXISTS {schema}.channel_items (
    thread_id     text    NOT NULL,
    checkpoint_ns text    NOT NULL DEFAULT '',
    channel       text    NOT NULL,
    version       text    NOT NULL,
    idx           integer NOT NULL,
    type          text    NOT NULL,
    value         bytea,
    object_key    text,
    object_sha256 text,
    object_size   bigint,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version, idx)
);

CREATE INDEX IF NOT EXISTS channel_items_object_key_idx
    ON {schema}.channel_items (object_key) WHERE object_key IS NOT NULL;

DO $lz4$
BEGIN
    EXECUTE format('ALTER TABLE %I.channel_items ALTER COLUMN value SET COMPRESSION lz4', {schema_literal});
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    NULL;
END
$lz4$;
