"""The replay page's HTML, through Starlette's test client: the threads list, a thread's
timeline, a step with its tool call and result side by side, the diff marking an edited
message, text from the database escaped, and the pages' own static files. (What the
page's script does, live updates and keys, is for the browser tests.)"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from langchain_core.messages import AIMessage
from psycopg import sql
from starlette.testclient import TestClient

import agents
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli.target import Target
from langgraph_pg_durable.web import create_app


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = f"lgpd_pages_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        agents.sample_threads(saver)
        graph = agents.tool_agent(saver, agents.calculator_replies())
        config = {"configurable": {"thread_id": "edit-1"}}
        graph.invoke({"messages": [("user", "<script>alert(1)</script> what is 1+2?")]}, config, durability="sync")
        graph.update_state(config, {"messages": [AIMessage("1 + 2 = three", id="ai-2")]})
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def client(pg_dsn: str, schema: str) -> Iterator[TestClient]:
    with TestClient(create_app(Target(pg_dsn, schema).saver, schema=schema), base_url="http://127.0.0.1:8765") as client:
        yield client


def page(client: TestClient, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def test_the_threads_page_links_every_thread_and_filters(client: TestClient) -> None:
    html = page(client, "/")
    for thread in ("calc-1", "edit-1", "flaky-1", "order-7", "team-1"):
        assert f'href="/threads/{thread}"' in html
    assert 'class="badge interrupted"' in html
    waiting = page(client, "/?status=interrupted")
    assert "order-7" in waiting and "calc-1" not in waiting
    assert "calc-1" in page(client, "/?meta=user%3Dana") and "order-7" not in page(client, "/?meta=user%3Dana")
    assert client.get("/?status=finished").status_code == 400


def test_a_thread_page_is_a_timeline_with_nested_subgraphs(client: TestClient) -> None:
    html = page(client, "/threads/calc-1")
    assert html.count("data-checkpoint=") == 8 and 'href="/threads/calc-1/steps/1"' in html
    assert 'data-api="/api/threads/calc-1/steps?limit=50"' in html  # what the page polls for new steps
    assert '<span class="tools"><bdi>add</bdi></span>' in html and '<q class="reply" dir="auto">1 + 2 = 3</q>' in html  # what each step did
    assert '<td class="num">17</td>' in html and "34 tokens" in html  # a step's tokens, and a run's
    team = page(client, "/threads/team-1")
    assert 'class="depth-1"' in team and '<span class="ns"><bdi>writer</bdi></span>' in team
    failed = page(client, "/threads/flaky-1")
    assert 'class="badge error"' in failed


def test_a_step_shows_the_tool_call_beside_its_result(client: TestClient) -> None:
    html = page(client, "/threads/calc-1/steps/1")
    call = re.search(r'<div class="call" data-call="call-1">(.*?)</div>\s*</div>', html, re.S)
    assert call is not None and '<code class="tool"><bdi>add</bdi></code>' in call.group(1) and "<pre>3</pre>" in call.group(1)
    assert 'rel="prev"' in html and 'href="/threads/calc-1/steps/2"' in html  # keyboard navigation's links
    failed = page(client, "/threads/flaky-1/steps/1")
    assert "ValueError: service down for &#39;weather&#39;" in failed and "<summary>traceback</summary>" in failed


def test_text_from_the_database_is_escaped(client: TestClient) -> None:
    html = page(client, "/threads/edit-1/steps/1")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html


def test_the_diff_marks_an_edited_message(client: TestClient) -> None:
    newest = page(client, "/threads/edit-1/steps/4")  # update_state replaced ai-2 by id
    assert "0 added, 0 removed, 1 edited" in newest
    edited = re.search(r'<div class="change edited">(.*?)</div></div>', newest, re.S)
    assert edited is not None and "1 + 2 = 3" in newest and "1 + 2 = three" in newest
    against = page(client, "/threads/edit-1/steps/4?against=0")
    assert "changes from step 0" in against and "3 added" in against


def test_missing_pages_and_static_files(client: TestClient) -> None:
    missing = client.get("/threads/nobody")
    assert missing.status_code == 404 and "has no checkpoints" in missing.text and missing.headers["content-type"].startswith("text/html")
    assert client.get("/threads/calc-1/steps/99").status_code == 404
    css, js = client.get("/static/app.css"), client.get("/static/app.js")
    assert css.status_code == 200 and "prefers-color-scheme: dark" in css.text
    assert js.status_code == 200 and "textContent" in js.text and "innerHTML" not in js.text
