"""The durability report (core/durability.py), from settings rows alone: what a crash or a
failover can lose, commits that hang, and what is only a note; the `synchronous_commit`
option, checked, and sent before a saver's writes only."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from langgraph_pg_durable import AsyncDurablePostgresSaver, ConfigError, DurablePostgresSaver
from langgraph_pg_durable.core.durability import (
    Durability,
    Standby,
    check_synchronous_commit,
    durability_report,
    sync_standbys_needed,
)
from langgraph_pg_durable.core.plan import Query
from langgraph_pg_durable.sql.durability import READ, SET_SYNCHRONOUS_COMMIT, DurabilityColumn

CRASH = "the server acknowledges commits a crash can lose"
ASYNC = "replication is asynchronous"


def row(
    fsync: str | None = "on",
    full_page_writes: str | None = "on",
    synchronous_commit: str | None = "on",
    names: str | None = "",
    in_recovery: bool | None = False,
    standbys: list[list[Any]] | None = None,
) -> tuple[Any, ...]:
    """A row of sql.durability.READ, as the server sends it (standbys: NULL for none)."""
    return (fsync, full_page_writes, synchronous_commit, names, in_recovery, standbys)


def streaming(name: str = "s1", sync_state: str | None = "sync", lag: float | None = 0.002) -> list[Any]:
    return [name, "streaming" if sync_state is not None else None, sync_state, lag]


def test_the_row_is_declared_once() -> None:
    assert DurabilityColumn.names() == (
        "fsync",
        "full_page_writes",
        "synchronous_commit",
        "synchronous_standby_names",
        "in_recovery",
        "standbys",
    )
    assert READ.lstrip().startswith("SELECT " + ", ".join(DurabilityColumn.names()) + "\n")


def test_the_test_servers_settings_warn_of_fsync_and_note_asynchronous_replication() -> None:
    report = durability_report(row(fsync="off"))
    assert report.problems == (f"fsync is off: {CRASH}",)
    assert len(report.notes) == 1 and report.notes[0].startswith(ASYNC)
    assert (report.in_recovery, report.standbys, report.commit_level) == (False, (), "on")
    assert report.message().startswith(f"fsync is off: {CRASH}; note: {ASYNC}")
    assert (
        "fsync=off, full_page_writes=on, synchronous_commit=on, synchronous_standby_names=''; a primary with 0 standbys" in report.summary()
    )


@pytest.mark.parametrize("name", ["fsync", "full_page_writes", "synchronous_commit"])
def test_each_setting_a_crash_can_lose_commits_under_is_a_problem(name: str) -> None:
    report = durability_report(row(**{name: "off"}))
    assert report.problems == (f"{name} is off: {CRASH}",)


def test_a_saver_option_covers_synchronous_commit_off() -> None:
    report = durability_report(row(synchronous_commit="off"), "on")
    assert report.problems == () and report.commit_level == "on"
    assert "synchronous_commit is off for this role, but the saver's commits run with on" in report.notes
    assert "synchronous_commit=off (the saver's commits: on)" in report.summary()


def test_a_synchronous_standby_connected_is_no_problem() -> None:
    report = durability_report(row(names="*", standbys=[streaming(), streaming("s2", "async", None)]))
    assert report.problems == ()
    assert report.notes == ("replication is synchronous: a commit waits for 1 standby (on)",)
    assert report.standbys == (Standby("s1", "streaming", "sync", 0.002), Standby("s2", "streaming", "async", None))
    assert report.message().startswith("note: replication is synchronous")


@pytest.mark.parametrize(
    ("names", "standbys", "hangs"),
    [
        ("*", None, True),  # named, none connected
        ("s1", [streaming("s1", "potential")], True),  # connected, not (yet) sync: catching up
        ("FIRST 2 (s1, s2, s3)", [streaming("s1"), streaming("s3", "potential")], True),
        ("2 (s1, s2)", [streaming("s1"), streaming("s2")], False),
        ("ANY 2 (s1, s2, s3)", [streaming("s1", "quorum"), streaming("s2", "quorum")], False),
        ("any 2 (s1, s2, s3)", [streaming("s1", "quorum")], True),
    ],
)
def test_named_synchronous_standbys_not_connected_hang_commits(names: str, standbys: list[list[Any]] | None, hangs: bool) -> None:
    report = durability_report(row(names=names, standbys=standbys))
    assert bool(report.problems) == hangs
    if hangs:
        (problem,) = report.problems
        assert problem.startswith(f"synchronous_standby_names is {names!r}") and "commits hang until" in problem


def test_standbys_whose_state_is_hidden_from_the_role_are_not_taken_for_missing() -> None:
    # pg_stat_replication without pg_read_all_stats: the name alone.
    report = durability_report(row(names="*", standbys=[["walreceiver", None, None, None]]))
    assert report.problems == ()
    assert any("pg_read_all_stats" in note for note in report.notes)
    assert report.standbys == (Standby("walreceiver", None, None, None),)


def test_commits_waiting_for_no_standby_do_not_hang() -> None:
    assert durability_report(row(synchronous_commit="off", names="*")).problems == (f"synchronous_commit is off: {CRASH}",)


def test_local_commits_with_synchronous_standbys_named_can_be_lost_by_a_failover() -> None:
    (problem,) = durability_report(row(synchronous_commit="local", names="*", standbys=[streaming()])).problems
    assert "synchronous_commit is local" in problem and "a failover can lose" in problem
    (problem,) = durability_report(row(names="*", standbys=[streaming()]), "local").problems
    assert "synchronous_commit is local" in problem
    # Nothing named: local is on; the note on asynchronous replication says the rest.
    report = durability_report(row(synchronous_commit="local"))
    assert report.problems == () and report.notes[0].startswith(ASYNC)


def test_a_standby_refuses_writes() -> None:
    report = durability_report(row(in_recovery=True, names="*"))
    assert report.problems == (
        "the server is a standby (in recovery): it refuses writes; connect to the primary (target_session_attrs=read-write)",
    )
    assert "a standby (in recovery) with 0 standbys" in report.summary()


def test_settings_hidden_from_the_role_are_a_note() -> None:
    report = durability_report(row(fsync=None, full_page_writes=None, names=None, in_recovery=None))
    assert report.problems == ()
    assert report.notes == ("this role cannot read fsync, full_page_writes, synchronous_standby_names",)


def test_the_report_is_frozen() -> None:
    report = durability_report(row())
    assert isinstance(report, Durability)
    with pytest.raises(AttributeError):
        report.fsync = "off"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("names", "needed"), [("", 0), ("  ", 0), ("*", 1), ("a, b", 1), ("2 (a, b)", 2), ("FIRST 3 (a,b,c)", 3), ("ANY 2 (a, b)", 2)]
)
def test_how_many_synchronous_standbys_a_commit_waits_for(names: str, needed: int) -> None:
    assert sync_standbys_needed(names) == needed


@pytest.mark.parametrize("value", [None, "local", "remote_write", "on", "remote_apply"])
def test_the_option_takes_the_levels_at_least_a_local_flush(value: str | None) -> None:
    assert check_synchronous_commit(value) == value


@pytest.mark.parametrize("value", ["off", "ON", "true", " on", "", True, 1])
def test_the_option_refuses_anything_else_by_name(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^synchronous_commit must be None .* got " + repr(value).replace("(", r"\(")):
        check_synchronous_commit(value)


@pytest.mark.parametrize("cls", [DurablePostgresSaver, AsyncDurablePostgresSaver])
def test_a_saver_refuses_a_bad_option_before_any_io(cls: Any) -> None:
    with pytest.raises(ConfigError, match="synchronous_commit must be .* got 'off'"):
        cls(psycopg.Connection, synchronous_commit="off")


def test_the_setting_goes_before_writes_only() -> None:
    plain = DurablePostgresSaver(psycopg.Connection)  # type: ignore[arg-type]
    strict = DurablePostgresSaver(psycopg.Connection, synchronous_commit="remote_apply")  # type: ignore[arg-type]
    write = Query("put", "SELECT 1", {}, locks=[7])
    read = Query("get_tuple", "SELECT 1", {})
    assert plain._preamble(write) == [(plain.sql.lock_thread, {"lock_key": 7})]
    both = Query("delete", "SELECT 1", {}, locks=[3, 7])
    assert [sql for sql, _ in plain._preamble(both)] == [plain.sql.lock_threads]
    assert strict._preamble(write) == [strict._preamble(write)[0], (SET_SYNCHRONOUS_COMMIT, {"synchronous_commit": "remote_apply"})]
    assert plain._preamble(read) == strict._preamble(read) == []
    assert (plain.synchronous_commit, strict.synchronous_commit, strict.durability) == (None, "remote_apply", None)
