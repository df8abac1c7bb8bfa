-- What a task's side effect returned (`once()`, langgraph_pg_durable/effects.py), committed
-- right after the call, before the task's writes: a task re-run after a crash, a retry or a
-- resume finds it and returns it instead of calling again. Keyed as the task's writes are
-- (the checkpoint it ran from, in its namespace, and the task), then by the call's key.
-- `type`/`value` hold the result as the saver's serializer wrote it (encrypted under
-- EncryptedSerializer); `result` is its JSON for a person (a marker when encrypted).
CREATE TABLE IF NOT EXISTS {schema}.effects (
    thread_id     text        NOT NULL,
    checkpoint_ns text        NOT NULL DEFAULT '',
    checkpoint_id text        NOT NULL,
    task_id       text        NOT NULL,
    key           text        NOT NULL,
    run_id        text        NOT NULL DEFAULT '',
    type          text        NOT NULL,
    value         bytea,
    result        jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, key)
);
