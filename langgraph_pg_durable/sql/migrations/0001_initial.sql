-- One row per checkpoint (one graph super-step). thread_id leads every key so the
-- tables can be distributed by thread (Citus) without changes.
CREATE TABLE IF NOT EXISTS {schema}.checkpoints (
    thread_id            text        NOT NULL,
    checkpoint_ns        text        NOT NULL DEFAULT '',
    checkpoint_id        text        NOT NULL,
    parent_checkpoint_id text,
    run_id               text,
    step                 integer,
    source               text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    -- the checkpoint without its channel values: v, ts, channel_versions, versions_seen, ...
    checkpoint           jsonb       NOT NULL,
    -- the channels whose values this checkpoint holds, and the version of each (aligned)
    value_channels       text[]      NOT NULL DEFAULT '{{}}',
    value_versions       text[]      NOT NULL DEFAULT '{{}}',
    metadata             jsonb       NOT NULL DEFAULT '{{}}',
    -- the serializer's form of the metadata, kept only when jsonb cannot hold it exactly
    metadata_exact       bytea,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);

CREATE INDEX IF NOT EXISTS checkpoints_run_step_idx
    ON {schema}.checkpoints (run_id, step);

CREATE INDEX IF NOT EXISTS checkpoints_metadata_idx
    ON {schema}.checkpoints USING gin (metadata jsonb_path_ops);

-- A channel's value is stored once per (thread, namespace, channel, version), however
-- many checkpoints hold that version.
CREATE TABLE IF NOT EXISTS {schema}.channel_values (
    thread_id     text NOT NULL,
    checkpoint_ns text NOT NULL DEFAULT '',
    channel       text NOT NULL,
    version       text NOT NULL,
    type          text NOT NULL,
    value         bytea,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);

-- Pending writes: what each task of the next super-step produced, once per (task, idx).
CREATE TABLE IF NOT EXISTS {schema}.checkpoint_writes (
    thread_id     text        NOT NULL,
    checkpoint_ns text        NOT NULL DEFAULT '',
    checkpoint_id text        NOT NULL,
    task_id       text        NOT NULL,
    idx           integer     NOT NULL,
    task_path     text        NOT NULL DEFAULT '',
    channel       text        NOT NULL,
    type          text        NOT NULL,
    value         bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
