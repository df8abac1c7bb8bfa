-- Values past the offload threshold live in an object store, content-addressed by
-- SHA-256; the row keeps the reference and `value` stays NULL. gc() asks which keys
-- rows still reference, so each table has an index on the key of offloaded rows only.
ALTER TABLE {schema}.channel_values
    ADD COLUMN IF NOT EXISTS object_key    text,
    ADD COLUMN IF NOT EXISTS object_sha256 text,
    ADD COLUMN IF NOT EXISTS object_size   bigint;

ALTER TABLE {schema}.checkpoint_writes
    ADD COLUMN IF NOT EXISTS object_key    text,
    ADD COLUMN IF NOT EXISTS object_sha256 text,
    ADD COLUMN IF NOT EXISTS object_size   bigint;

CREATE INDEX IF NOT EXISTS channel_values_object_key_idx
    ON {schema}.channel_values (object_key) WHERE object_key IS NOT NULL;

CREATE INDEX IF NOT EXISTS checkpoint_writes_object_key_idx
    ON {schema}.checkpoint_writes (object_key) WHERE object_key IS NOT NULL;
