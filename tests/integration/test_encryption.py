"""With an encrypting serializer: nothing stored lets a reader of the tables test a guess of
the plaintext, and a row that is not encrypted is refused unless the saver is told to read
rows written before encryption was turned on."""

from __future__ import annotations

import base64
import hashlib

import psycopg
import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg import sql

from checkpoints import first_put
from langgraph_pg_durable import DeserializationError, DurablePostgresSaver
from langgraph_pg_durable.core.codec import digest
from langgraph_pg_durable.core.lists import WRITE_KEY_PREFIX

KEY = b"0123456789abcdef"
SECRET = "the launch code is 0000"


def encrypted() -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=KEY)


def _all_bytes(pg_dsn: str, schema: str) -> bytes:
    """Every column of every row of the saver's tables, as text (bytea in hex): what a reader of them sees."""
    out = []
    with psycopg.connect(pg_dsn) as conn:
        for table in ("checkpoints", "channel_values", "channel_items", "checkpoint_writes"):
            for row in conn.execute(sql.SQL("SELECT t::text FROM {}.{} t").format(sql.Identifier(schema), sql.Identifier(table))):
                out.append(row[0])
    return "\n".join(out).encode()


def test_a_write_stored_as_items_keys_nothing_a_reader_could_guess(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=encrypted(), snapshot_every=8, list_min_bytes=0) as saver:
        saver.setup()
        config = first_put(saver, "t", {"messages": [f"m{i}" for i in range(20)]})
        saver.put_writes(config, [("messages", [SECRET])], "task")
        assert saver.get_tuple(config).pending_writes == [("task", "messages", [SECRET])]
    with psycopg.connect(pg_dsn) as conn:
        (key,) = conn.execute(
            sql.SQL("SELECT item_version FROM {}.checkpoint_writes WHERE item_version IS NOT NULL").format(sql.Identifier(schema_name))
        ).fetchone()
    # What a reader who guessed the message right would compute, had the key hashed the plaintext.
    identity = f"{config['configurable']['checkpoint_id']}\x00task\x000"
    guess = hashlib.blake2b(identity.encode(), digest_size=9)
    guess.update(digest(*JsonPlusSerializer().dumps_typed(SECRET)))
    assert key != WRITE_KEY_PREFIX + base64.urlsafe_b64encode(guess.digest()).decode()
    seen = _all_bytes(pg_dsn, schema_name)
    assert SECRET.encode() not in seen and SECRET.encode().hex().encode() not in seen  # bytea shows as hex


def test_a_row_forged_without_encryption_is_refused(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=encrypted()) as saver:
        saver.setup()
        config = first_put(saver, "t", {"doc": {"a": "long enough to get a row of its own"}})
        kept = first_put(saver, "kept", {"doc": {"b": "another value with a row of its own"}})
    forged_type, forged = JsonPlusSerializer().dumps_typed({"a": "what the forger wants read"})
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.channel_values SET type = %s, value = %s WHERE thread_id = 't'").format(sql.Identifier(schema_name)),
            (forged_type, forged),
        )
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=encrypted()) as fresh:
        with pytest.raises(DeserializationError, match="not encrypted.*accept_plaintext") as refused:
            fresh.get_tuple(config)
        assert fresh.get_tuple(kept).checkpoint["channel_values"] == {"doc": {"b": "another value with a row of its own"}}
    assert "'t'" in str(refused.value) and "'doc'" in str(refused.value)


def test_threads_written_before_encryption_read_with_accept_plaintext(pg_dsn: str, schema_name: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as plain:
        plain.setup()
        old = first_put(plain, "old", {"doc": {"from": "before encryption was turned on"}, "n": 1})
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=encrypted()) as strict:
        with pytest.raises(DeserializationError, match="not encrypted"):
            strict.get_tuple(old)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=encrypted(), accept_plaintext=True) as migrating:
        assert migrating.get_tuple(old).checkpoint["channel_values"] == {"doc": {"from": "before encryption was turned on"}, "n": 1}
        new = first_put(migrating, "new", {"doc": {"from": "after"}})
        assert migrating.with_allowlist([("collections", "OrderedDict")]).get_tuple(old) is not None
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, serde=encrypted()) as strict:
        assert strict.get_tuple(new).checkpoint["channel_values"] == {"doc": {"from": "after"}}
