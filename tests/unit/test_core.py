"""The sans-I/O core on its own: versions, retry classification, metadata containment."""

from __future__ import annotations

import ormsgpack
import psycopg
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg import errors as pg_errors
from psycopg_pool import PoolClosed, PoolTimeout

from langgraph_pg_durable import DatabaseUnavailableError, RetryPolicy, StatementError
from langgraph_pg_durable.errors import shown
from langgraph_pg_durable.retry import Attempts, is_server_lost, is_transient
from langgraph_pg_durable.core.codec import Codec
from langgraph_pg_durable.core.decode import unpack_writes
from langgraph_pg_durable.core.encode import PACKED_WRITES_TYPE, put_writes_params
from langgraph_pg_durable.core.keys import next_version
from langgraph_pg_durable.core.lists import ListPolicy
from langgraph_pg_durable.core.metadata import metadata_contains
from langgraph_pg_durable.core.offload import Placement


def test_versions_increase_and_accept_the_framework_defaults() -> None:
    first = next_version(None)
    second = next_version(first)
    assert first < second
    assert next_version(7) > next_version(6)
    assert next_version(7).startswith("00000008.")
    assert next_version(15) > next_version(9)  # fixed width: hex digits still sort as text
    assert len(first) == 20
    # Two forks of one parent get distinct versions of the same number.
    assert len({next_version(first) for _ in range(50)}) == 50


def test_a_thread_begun_with_long_versions_keeps_them() -> None:
    legacy = "00000000000000000101.e7a4f2df7bbd2de6"
    after = next_version(legacy)
    assert after.startswith("00000000000000000102.") and len(after) == len(legacy)
    assert after > legacy


@pytest.mark.parametrize(
    "exc, transient",
    [
        (pg_errors.SerializationFailure("x"), True),
        (pg_errors.DeadlockDetected("x"), True),
        (pg_errors.AdminShutdown("x"), True),
        (psycopg.OperationalError("connection lost"), True),
        (pg_errors.QueryCanceled("statement timeout"), False),
        (PoolClosed("the pool 'langgraph-pg-durable' is already closed"), False),
        (pg_errors.UniqueViolation("x"), False),
        (ValueError("x"), False),
        (pg_errors.CannotConnectNow("x"), True),
        (pg_errors.TooManyConnections("x"), True),
        (pg_errors.ConnectionFailure("x"), True),
        (pg_errors.CrashShutdown("x"), True),
        (PoolTimeout("couldn't get a connection after 30.00 sec"), True),
        (pg_errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), True),
        # Permanent: a 1 MB key was once retried for 8 s as "transient".
        (pg_errors.ProgramLimitExceeded("index row size 1048808 exceeds maximum 2704"), False),
        (pg_errors.InsufficientPrivilege("permission denied for schema x"), False),
        (pg_errors.DiskFull("could not extend file"), False),
        (pg_errors.UndefinedTable("relation does not exist"), False),
    ],
)
def test_transient_errors(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_attempts_are_bounded_and_end_in_a_clear_error() -> None:
    attempts = Attempts(RetryPolicy(max_attempts=3, initial_backoff=0.01), "put on thread 't'")
    exc = pg_errors.SerializationFailure("could not serialize access")
    assert 0 < attempts.next_delay(exc) <= 0.01
    assert 0 < attempts.next_delay(exc) <= 0.02
    with pytest.raises(DatabaseUnavailableError, match="put on thread 't' failed after 3 attempt"):
        attempts.next_delay(exc)


@pytest.mark.parametrize(
    "exc, lost",
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (pg_errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), True),
        (pg_errors.AdminShutdown("terminating connection due to unexpected postmaster exit"), True),
        (PoolTimeout("couldn't get a connection after 30.00 sec"), True),
        (pg_errors.SerializationFailure("x"), False),
        (pg_errors.TooManyConnections("x"), False),
    ],
)
def test_a_lost_server_is_told_from_a_lost_race(exc: Exception, lost: bool) -> None:
    assert is_server_lost(exc) is lost


def test_a_lost_server_is_retried_past_max_attempts_until_the_reconnect_deadline() -> None:
    """A failover takes longer than a lost race: its attempts are not counted, the clock is."""
    policy = RetryPolicy(max_attempts=2, initial_backoff=0.001, max_backoff=0.001, deadline=0.0, reconnect_deadline=3600.0)
    attempts = Attempts(policy, "put on thread 't'")
    for _ in range(50):
        assert 0 < attempts.next_delay(pg_errors.ReadOnlySqlTransaction("read-only")) <= 0.001
    with pytest.raises(DatabaseUnavailableError, match="51 attempt"):
        attempts.next_delay(pg_errors.SerializationFailure("could not serialize access"))  # bounded by `deadline`
    over = Attempts(RetryPolicy(reconnect_deadline=0.0), "put on thread 't'")
    with pytest.raises(DatabaseUnavailableError, match="put on thread 't' failed after 1 attempt"):
        over.next_delay(psycopg.OperationalError("connection refused"))


def test_a_permanent_error_is_raised_at_once_as_a_named_error() -> None:
    attempts = Attempts(RetryPolicy(), "get_tuple on thread 't'")
    with pytest.raises(StatementError, match="get_tuple on thread 't' failed.*23505") as raised:
        attempts.next_delay(pg_errors.UniqueViolation("dup"))
    assert raised.value.sqlstate == "23505" and isinstance(raised.value.__cause__, pg_errors.UniqueViolation)
    assert attempts.count == 1


def test_messages_quote_a_huge_id_shortly() -> None:
    huge = "t" * 1_000_000
    attempts = Attempts(RetryPolicy(max_attempts=1, reconnect_deadline=0.0), f"put on thread {shown(huge)}")
    with pytest.raises(DatabaseUnavailableError) as raised:
        attempts.next_delay(psycopg.OperationalError("x" * 1_000_000))
    assert len(str(raised.value)) < 1_000 and "1,000,002 characters" in str(raised.value)


def test_metadata_contains_follows_jsonb_containment() -> None:
    doc = {"source": "loop", "step": 3, "tags": ["a", "b"], "deep": {"x": 1, "y": [1, 2]}, "flag": True}
    assert metadata_contains(doc, {"source": "loop"})
    assert metadata_contains(doc, {"tags": ["b"], "deep": {"y": [2]}})
    assert not metadata_contains(doc, {"step": 4})
    assert not metadata_contains(doc, {"flag": 1})  # jsonb: true is not 1
    assert not metadata_contains(doc, {"missing": None})


def test_the_list_memory_is_bounded_by_the_items_its_states_reference() -> None:
    from langgraph_pg_durable.core.lists import ListState
    from langgraph_pg_durable.memory import ListMemory

    def state(version: str, items: int) -> ListState:
        return ListState(version, (), None, tuple((version, i) for i in range(items)))

    memory = ListMemory(max_states=100, max_locations=1000)
    for step in range(1, 40):  # a thread whose list grows by 10 items a step
        memory.remember("t", "", "messages", state(f"{step:08x}.x", 10 * step))
        memory.holds("t", "", f"c{step}", {"messages": f"{step:08x}.x"})
        assert memory.locations <= 1000 or memory.locations == 10 * step  # one state alone may exceed it
    assert memory.base("t", "", "c39", "messages") is not None  # the newest stays
    assert memory.base("t", "", "c10", "messages") is None  # older ones went
    memory.remember("t", "", "messages", state("huge", 5000))  # bigger than the budget: kept alone
    assert memory.locations == 5000 and [s.version for _, s in memory.recent("t", "")] == ["huge"]
    memory.forget("t", "")
    assert memory.locations == 0


def test_a_packed_row_is_tried_first_and_names_the_indexes_it_holds() -> None:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}}
    placement = Placement(threshold=0, prefix="p", enabled=False)
    built = put_writes_params(Codec(JsonPlusSerializer()), config, [("a", 1), ("b", 2), ("c", 3)], "task", "", placement, ListPolicy())
    assert built.packed is not None and built.packed["packed_idx"] == 2  # the row holds indexes 0 to 2
    assert list(built.rows()["idx"]) == [0, 1, 2]  # and each write on its own, for a task re-run
    assert "idx" not in built.params and "idx" not in built.packed  # made only for the rows' statements
    # One write is packed too: the row holds the task's action (no action_log row beside it).
    single = put_writes_params(Codec(JsonPlusSerializer()), config, [("a", 1)], "task", "", placement, ListPolicy())
    assert single.packed is not None and single.packed["packed_idx"] == 0
    special = put_writes_params(Codec(JsonPlusSerializer()), config, [("__error__", 1)], "task", "", placement, ListPolicy())
    assert special.packed is None


def test_the_first_write_at_an_index_is_the_one_read_back() -> None:
    packed = ormsgpack.packb([[0, "a", "msgpack", b"first-a"], [1, "b", "msgpack", b"first-b"]])
    rows = [
        ("task", "a", "", 0, "msgpack", b"plain-a"),  # raced a packed row of the same task
        ("task", "a", "", 1, PACKED_WRITES_TYPE, packed),
        ("task", "c", "", 2, "msgpack", b"new-c"),
        ("other", "a", "", 0, "msgpack", b"other-a"),
    ]
    assert sorted(unpack_writes(rows)) == [
        ("other", "a", "", 0, "msgpack", b"other-a"),
        ("task", "a", "", 0, "msgpack", b"first-a"),
        ("task", "b", "", 1, "msgpack", b"first-b"),
        ("task", "c", "", 2, "msgpack", b"new-c"),
    ]
