"""A warm read of a list hands out again the items the saver holds only when nothing can
change them in place (strings, numbers, bytes); any other item is decoded afresh, so a
caller that mutates what it read never changes what the next read returns."""

from __future__ import annotations

from typing import Any

import pytest

from checkpoints import next_put
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.core import codec as codec_module


def _thread(saver: DurablePostgresSaver, items: list[Any], thread_id: str = "reads") -> dict:
    versions = {"items": saver.get_next_version(None, None)}
    config = next_put(saver, {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, {"items": items}, versions, versions, step=0)
    grown = {"items": saver.get_next_version(versions["items"], None)}
    return next_put(saver, config, {"items": [*items, items[0]]}, grown, grown, step=1)


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    load = codec_module.Codec._load_items

    def counting(self: Any, raw: Any) -> list[Any]:
        calls.append(len(raw))
        return load(self, raw)

    monkeypatch.setattr(codec_module.Codec, "_load_items", counting)
    return calls


def test_strings_are_handed_out_again_in_a_new_list(pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        config = _thread(saver, [f"line {i}" for i in range(300)])
        decodes = _decodes(monkeypatch)
        first = saver.get_tuple(config).checkpoint["channel_values"]["items"]  # type: ignore[union-attr]
        first.append("appended by the caller")
        second = saver.get_tuple(config).checkpoint["channel_values"]["items"]  # type: ignore[union-attr]
    assert second == [f"line {i}" for i in range(300)] + ["line 0"]
    assert decodes == []  # the objects the put was made of, not their bytes


@pytest.mark.parametrize(
    "mutable",
    [{"role": "user", "content": "hi"}, ["a", "list"], ("a tuple", ["holding", "a list"])],
    ids=["dict", "list", "tuple-of-list"],
)
def test_items_a_caller_can_change_in_place_are_decoded_afresh(pg_dsn: str, schema_name: str, mutable: Any) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        items = [mutable, "plain"] * 100
        config = _thread(saver, items)
        read = saver.get_tuple(config).checkpoint["channel_values"]["items"]  # type: ignore[union-attr]
        inner = read[0] if not isinstance(read[0], tuple) else read[0][1]
        if isinstance(inner, dict):
            inner["content"] = "changed by the caller"
        else:
            inner.append("changed by the caller")
        again = saver.get_tuple(config).checkpoint["channel_values"]["items"]  # type: ignore[union-attr]
        as_stored = saver.serde.loads_typed(saver.serde.dumps_typed(mutable))  # a tuple reads back as a list
    assert again[0] == as_stored and again[-1] == as_stored


# The held groups go to the server as \x1f-joined key columns, or as JSON when a key holds
# that character (core.history.known_groups): either way none of them comes back.
@pytest.mark.parametrize("thread_id", ["reads", "reads\x1fsplit"], ids=["plain", "separator-in-thread-id"])
def test_a_history_walk_does_not_fetch_the_items_the_saver_holds(pg_dsn: str, schema_name: str, thread_id: str) -> None:
    def walk(saver: DurablePostgresSaver) -> tuple[list[Any], int]:
        rows: list[int] = []
        send = saver._send

        def counting(conn: Any, query: Any, **options: Any) -> Any:
            fetched = send(conn, query, **options)
            if "known_versions" in query.params:  # a page's details
                rows.append(len(fetched))
            return fetched

        saver._send = counting  # type: ignore[method-assign]
        found = [t.checkpoint["channel_values"]["items"] for t in saver.list({"configurable": {"thread_id": thread_id}}, limit=5)]
        return found, sum(rows)

    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name, list_min_bytes=0) as saver:
        saver.setup()
        _thread(saver, [{"n": i} for i in range(300)], thread_id)  # items the saver holds the bytes of, not the objects
        warm, warm_rows = walk(saver)
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema_name) as fresh:
        cold, cold_rows = walk(fresh)
    assert warm == cold and len(warm[0]) == 301
    assert warm_rows < 10 < 300 < cold_rows  # the value rows alone, against every item too
