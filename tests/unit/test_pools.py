"""The pools `from_conn_string` builds: bounded waits in the connection string, and a
reconnection delay that stops doubling (pure: no server)."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from langgraph_pg_durable.pools import (
    CONNECTION_DEFAULTS,
    RECONNECT_EVERY,
    AsyncFailoverPool,
    FailoverPool,
    _SteadyAttempt,
    with_connection_defaults,
)


@pytest.mark.parametrize(
    "given",
    [
        "postgresql://app@db1:5432,db2:5432/agents?target_session_attrs=read-write",
        "host=db1,db2 port=5432,5432 dbname=agents user=app target_session_attrs=read-write",
    ],
)
def test_the_defaults_bound_every_wait_and_keep_the_hosts(given: str) -> None:
    settings = conninfo_to_dict(with_connection_defaults(given))
    assert {k: settings[k] for k in CONNECTION_DEFAULTS} == CONNECTION_DEFAULTS
    assert settings["host"] == "db1,db2" and settings["target_session_attrs"] == "read-write" and settings["dbname"] == "agents"


def test_what_the_connection_string_sets_is_kept() -> None:
    settings = conninfo_to_dict(with_connection_defaults("host=db connect_timeout=3 keepalives=0"))
    assert settings["connect_timeout"] == "3" and settings["keepalives"] == "0"
    assert settings["tcp_user_timeout"] == CONNECTION_DEFAULTS["tcp_user_timeout"]


def test_reconnection_attempts_stop_doubling() -> None:
    attempt = _SteadyAttempt(timeout=300.0)
    delays = []
    for second in range(12):
        attempt.update_delay(float(second))
        delays.append(attempt.delay)
    assert delays[0] < 0.3 and all(d <= RECONNECT_EVERY for d in delays) and delays[3:] == [RECONNECT_EVERY] * 9
    assert not attempt.time_to_give_up(100.0) and attempt.time_to_give_up(300.0)


@pytest.mark.parametrize("kind", [FailoverPool, AsyncFailoverPool])
def test_the_pools_count_their_waiting_callers_as_their_stats_do(kind: type) -> None:
    pool = kind("host=unused", open=False)
    queue = pool._waiting  # psycopg_pool's queue, which `waiting()` reads without copying the stats
    assert pool.waiting() == pool.get_stats()["requests_waiting"] == 0
    queue.append(object())
    assert pool.waiting() == pool.get_stats()["requests_waiting"] == 1
