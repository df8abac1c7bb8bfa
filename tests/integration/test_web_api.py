"""The replay page's JSON endpoints, through Starlette's test client, on the sample
database: fields, paging, a step's paired tool call, the diff, 404s and 400s that name
what is missing, and the token."""

from __future__ import annotations

import uuid
from urllib.parse import quote
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from starlette.testclient import TestClient

import agents
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli.target import Target
from langgraph_pg_durable.web import create_app

LOCAL = "http://127.0.0.1:8765"  # a Host the app answers to


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = f"lgpd_web_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        agents.sample_threads(saver)
        for i in range(5):
            agents.approval(saver).invoke(
                {"item": "<script>alert(1)</script>"}, {"configurable": {"thread_id": f"w-{i}"}}, durability="sync"
            )
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def client(pg_dsn: str, schema: str) -> Iterator[TestClient]:
    with TestClient(create_app(Target(pg_dsn, schema).saver), base_url=LOCAL) as client:
        yield client


def ok(client: TestClient, url: str) -> Any:
    response = client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def test_threads_page_by_page(client: TestClient) -> None:
    first = ok(client, "/api/threads?limit=3")
    assert [t["thread_id"] for t in first["threads"]] == ["calc-1", "flaky-1", "order-7"] and first["next_after"] == "order-7"
    rest = ok(client, f"/api/threads?limit=100&after={first['next_after']}")
    assert [t["thread_id"] for t in rest["threads"]] == ["team-1", "w-0", "w-1", "w-2", "w-3", "w-4"] and rest["next_after"] is None
    assert ok(client, "/api/threads?status=error")["threads"][0]["thread_id"] == "flaky-1"
    assert [t["thread_id"] for t in ok(client, "/api/threads?meta.user=ana")["threads"]] == ["calc-1"]
    assert set(first["threads"][0]) == {
        "thread_id",
        "checkpoints",
        "last_step",
        "last_checkpoint_id",
        "last_run_id",
        "status",
        "last_activity",
        "metadata",
        "held_by",
    }


def test_a_thread_its_runs_and_steps(client: TestClient) -> None:
    runs = ok(client, "/api/threads/calc-1/runs")["runs"]
    assert len(runs) == 2 and runs[0]["status"] == "done"
    steps = ok(client, "/api/threads/calc-1/steps?limit=3")
    assert [s["step"] for s in steps["steps"]] == [6, 5, 4] and steps["next_before"] == steps["steps"][-1]["checkpoint_id"]
    more = ok(client, f"/api/threads/calc-1/steps?before={steps['next_before']}")
    assert [s["step"] for s in more["steps"]] == [3, 2, 1, 0, -1] and more["next_before"] is None
    assert more["steps"][2]["made_by"][0] == {
        "task_id": more["steps"][2]["made_by"][0]["task_id"],
        "agent": "agent",
        "action_type": "tool_call",
        "detail": None,
        "tools": ["add"],  # what a timeline names the step by
        "reply": None,
        "tokens": 17,
    }
    assert runs[0]["tokens"] > 0


def test_a_step_pairs_its_tool_call_and_the_diff_marks_changes(client: TestClient) -> None:
    view = ok(client, "/api/threads/calc-1/steps/1")
    assert view["tool_calls"] == [{"id": "call-1", "name": "add", "arguments": {"a": 1, "b": 2}, "result": "3", "answered": True}]
    assert ok(client, "/api/threads/calc-1/steps/-1")["step"] == -1
    found = ok(client, "/api/threads/calc-1/diff?from=0&to=3")
    assert found["differ"] is True and [m["content"] for m in found["messages"]["messages"]["added"]] == ["", "3", "1 + 2 = 3"]
    assert any(op["path"] == "/messages/3" for op in found["patch"])
    same = ok(client, "/api/threads/calc-1/diff?from=3&to=3")
    assert same["differ"] is False and same["patch"] == []


def test_the_state_at_a_checkpoint(client: TestClient) -> None:
    newest = ok(client, "/api/threads/calc-1/state")
    assert [m["content"] for m in newest["values"]["messages"]][-1] == "You're welcome."
    at_one = ok(client, "/api/threads/calc-1/steps/1")["checkpoint_id"]
    earlier = ok(client, f"/api/threads/calc-1/state?checkpoint={at_one}")
    assert earlier["checkpoint_id"] == at_one and len(earlier["values"]["messages"]) == 2
    assert client.get("/api/threads/calc-1/state?checkpoint=nope").status_code == 404


def test_what_is_not_there_is_a_404_and_a_bad_query_a_400(client: TestClient) -> None:
    missing = client.get("/api/threads/calc-1/steps/99")
    assert missing.status_code == 404 and "has no step 99" in missing.json()["error"]
    assert client.get("/api/threads/nobody/steps").status_code == 404
    assert client.get("/api/threads?status=finished").status_code == 400
    assert client.get("/api/threads?limit=many").status_code == 400
    assert client.get("/api/threads/calc-1/steps/one").status_code == 400


def test_hostile_ids_are_only_parameters(client: TestClient) -> None:
    for thread in ("x'; DROP TABLE checkpoints; --", "../../etc/passwd", "a/b/c"):
        found = client.get(f"/api/threads/{quote(thread, safe='')}/runs").json()  # as the page links them
        assert found == {"thread_id": thread, "runs": [], "next_before": None}
    assert ok(client, "/api/threads?limit=1")["threads"]  # still there
    view = ok(client, "/api/threads/w-0/steps/1")
    assert view["response"][0]["payload"]["state"] == {"status": "drafted"}
    assert "<script>" in str(ok(client, "/api/threads/w-0/steps/0"))  # JSON carries the text; the page escapes it


def test_a_token_is_required_when_set(pg_dsn: str, schema: str) -> None:
    token = "s3cret-s3cret-s3cret"
    with TestClient(create_app(Target(pg_dsn, schema).saver, token=token), base_url=LOCAL) as client:
        assert client.get("/api/threads").status_code == 401
        assert client.get("/api/threads", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/api/threads", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        first = client.get(f"/api/threads?token={token}&limit=1", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/api/threads?limit=1"
        assert token not in first.headers["set-cookie"]  # the cookie holds a session value, not the token
        assert client.get("/api/threads").status_code == 200  # the cookie now
