"""ThreadScan without a server: the WHERE and HAVING fragments of the filters given, the
keyset past every row read, and a status filter that never ends the scan early."""

from __future__ import annotations

import datetime

import pytest

from langgraph_pg_durable import ConfigError
from langgraph_pg_durable.core.paging import FIRST_PAGE
from langgraph_pg_durable.core.threads import ThreadScan

WHEN = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)


def _rows(names: list[str], status: str = "done") -> list[tuple]:
    return [(n, 3, 2, "c", "r", status, WHEN, '{"source": "loop"}', "r") for n in names]


def test_fragments_and_params_follow_the_filters() -> None:
    scan = ThreadScan(run_id="r1", metadata={"user": "ana"}, since=WHEN)
    assert scan.rows_where('"s"').count('"s".checkpoints') == 2
    assert scan.page_having() == "max(c.created_at) >= %(since)s"
    params = scan.page_params()
    assert params["after"] == "" and params["metadata"] == '{"user":"ana"}' and params["page"] == FIRST_PAGE
    assert ThreadScan().rows_where('"s"') == "true" and ThreadScan().page_having() == "true"


def test_a_status_filter_keeps_paging_past_threads_it_drops() -> None:
    scan = ThreadScan(status="error", limit=5)
    first = [f"t{i:02d}" for i in range(5)]
    assert scan.page_params()["page"] == 5
    assert scan.take_page(_rows(first)) == [] and not scan.done
    assert scan.page_params()["after"] == "t04"  # past the rows read, kept or not
    kept = scan.take_page(_rows([f"u{i}" for i in range(5)], "error"))
    assert [t.thread_id for t in kept] == [f"u{i}" for i in range(5)] and scan.done
    assert kept[0].metadata == {"source": "loop"}


def test_a_short_page_ends_the_scan() -> None:
    scan = ThreadScan()
    scan.page_params()
    assert len(scan.take_page(_rows(["a", "b"]))) == 2 and scan.done


@pytest.mark.parametrize(
    ("kwargs", "named"), [({"status": "finished"}, "status"), ({"until": "today"}, "until"), ({"limit": 1.5}, "limit")]
)
def test_bad_filters_name_themselves(kwargs: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ThreadScan(**kwargs)
