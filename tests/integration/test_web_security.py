"""The replay page against a hostile web page and hostile ids (README, "Security"): the Host
check, the token (made at start, at least 16 characters, counted failures, a session
cookie that is not the token, the `?token=` redirect), the headers on every response,
ids that stay in their URL segment, bidi isolation, and a 400 naming each bad parameter.

Each test here fails on the app before these were built (main 742c13c)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
import uvicorn
from langgraph.checkpoint.base import empty_checkpoint
from psycopg import sql
from starlette.testclient import TestClient
from typer.testing import CliRunner

import agents
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli import app as cli
from langgraph_pg_durable.cli.target import Target
from langgraph_pg_durable.web import create_app
from langgraph_pg_durable.web.guard import FailedChecks, session_value

LOCAL = "http://127.0.0.1:8765"
TOKEN = "correct-horse-battery-staple"
RTL = "\u202e"
HOSTILE_CHECKPOINT = "1f0-hostile&checkpoint=other"


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = f"lgpd_websec_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        agents.sample_threads(saver)
        graph = agents.tool_agent(saver, agents.calculator_replies())
        for thread in ("a/b", f"evil{RTL}gnp.exe", "calc-1/steps/1"):
            graph.invoke({"messages": [("user", "what is 1+2?")]}, {"configurable": {"thread_id": thread}}, durability="sync")
        checkpoint = {**empty_checkpoint(), "id": HOSTILE_CHECKPOINT}
        saver.put({"configurable": {"thread_id": "odd-ids", "checkpoint_ns": ""}}, checkpoint, {"source": "input", "step": -1}, {})
        turns = agents.approval(saver)
        for i in range(7):  # seven runs of one thread: runs come a page at a time
            turns.invoke({"item": f"draft {i}"}, {"configurable": {"thread_id": "many-runs"}}, durability="sync")
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def client(pg_dsn: str, schema: str) -> Iterator[TestClient]:
    with TestClient(create_app(Target(pg_dsn, schema).saver, schema=schema), base_url=LOCAL) as client:
        yield client


def guarded(pg_dsn: str, schema: str, **options: Any) -> TestClient:
    return TestClient(create_app(Target(pg_dsn, schema).saver, schema=schema, token=TOKEN, **options), base_url=LOCAL)


# -- the Host check --------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/api/threads", "/api/threads/calc-1/state", "/threads/calc-1", "/static/app.js"])
def test_a_rebound_name_reads_nothing(client: TestClient, path: str) -> None:
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", "localhost.:8765x"):
        refused = client.get(path, headers={"Host": host})
        assert refused.status_code == 421, (host, refused.status_code)
        assert "calc-1" not in refused.text and "is not this server's name" in refused.text
    for host in ("127.0.0.1:8765", "localhost:8765", "LOCALHOST", "[::1]:8765", "127.0.0.1"):
        assert client.get(path, headers={"Host": host}).status_code == 200, host


def test_allowed_hosts_add_names(pg_dsn: str, schema: str) -> None:
    app = create_app(Target(pg_dsn, schema).saver, allowed_hosts=("127.0.0.1", "lab.internal"))
    with TestClient(app, base_url="http://lab.internal:8765") as client:
        assert client.get("/api/threads").status_code == 200
        assert client.get("/api/threads", headers={"Host": "localhost:8765"}).status_code == 421


# -- headers ---------------------------------------------------------------------------------


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for path, status in (
        ("/", 200),
        ("/threads/calc-1/steps/1", 200),
        ("/api/threads", 200),
        ("/static/app.css", 200),
        ("/threads/nobody", 404),
        ("/api/threads?limit=x", 400),
    ):
        response = client.get(path)
        assert response.status_code == status, path
        policy = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-frame-options"] == "DENY"
    refused = client.get("/", headers={"Host": "evil.example"})
    assert refused.headers["content-security-policy"] and refused.headers["referrer-policy"] == "no-referrer"


def test_pages_hold_no_inline_script(client: TestClient) -> None:
    """What the policy refuses the pages never need: scripts come from /static only."""
    for path in ("/", "/threads/calc-1", "/threads/calc-1/steps/1"):
        html = client.get(path).text
        assert html.count("<script") == html.count('<script src="/static/app.js" defer></script>') == 1
        assert " style=" not in html and " onclick=" not in html


# -- the token -------------------------------------------------------------------------------


def test_static_files_need_the_token_too(pg_dsn: str, schema: str) -> None:
    with guarded(pg_dsn, schema) as client:
        assert client.get("/static/app.js").status_code == 401
        assert client.get("/static/app.js", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_the_token_link_sets_a_session_cookie_and_redirects_without_it(pg_dsn: str, schema: str) -> None:
    with guarded(pg_dsn, schema) as client:
        first = client.get(f"/threads/calc-1?token={TOKEN}&before=", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/threads/calc-1?before="
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"lgpd_session_8765={session_value(TOKEN)};")  # named for its port, not the token
        assert TOKEN not in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
        assert client.get("/threads/calc-1").status_code == 200  # the cookie now
        encoded = client.get(f"/threads/a%2Fb?token={TOKEN}", follow_redirects=False)
        assert encoded.headers["location"] == "/threads/a%2Fb"  # the id stays one segment
        # Followed from another site: a page that moves on (a Strict cookie is not sent on
        # a redirect another site started), the same cookie set.
        crossing = client.get(f"/threads/calc-1?token={TOKEN}&x=%22%3E", headers={"Sec-Fetch-Site": "cross-site"})
        assert crossing.status_code == 200 and crossing.headers["set-cookie"].startswith("lgpd_session_8765=")
        assert '<meta http-equiv="refresh" content="0; url=/threads/calc-1?x=%22%3E">' in crossing.text and TOKEN not in crossing.text
    with guarded(pg_dsn, schema) as client:
        client.cookies.set("lgpd_token", TOKEN)  # the old cookie, which held the token itself
        client.cookies.set("lgpd_session_9999", session_value(TOKEN))  # another port's
        assert client.get("/api/threads").status_code == 401


def test_a_network_bind_marks_the_cookie_secure(pg_dsn: str, schema: str) -> None:
    with guarded(pg_dsn, schema, secure_cookie=True) as client:
        assert "; Secure" in client.get(f"/?token={TOKEN}", follow_redirects=False).headers["set-cookie"]


def test_failed_token_checks_are_counted_then_refused(pg_dsn: str, schema: str) -> None:
    now = [1000.0]
    failures = FailedChecks(limit=3, window=60.0, clock=lambda: now[0])
    with guarded(pg_dsn, schema, failures=failures) as client:
        for guess in ("a" * 20, "b" * 20, "c" * 20):
            assert client.get("/api/threads", headers={"Authorization": f"Bearer {guess}"}).status_code == 401
        locked = client.get("/api/threads", headers={"Authorization": f"Bearer {TOKEN}"})
        assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0  # even the right one, until the window clears
        assert client.get(f"/?token={TOKEN}", follow_redirects=False).status_code == 429
        client.cookies.set("lgpd_session_8765", "stale" * 13)  # a stale cookie is refused, not counted
        assert client.get("/api/threads").status_code == 401
        client.cookies.clear()
        now[0] += 61
        assert client.get("/api/threads", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


@pytest.mark.parametrize("token", ["a", "short-token", " " * 20, "sixteen chars!!!", "tab\tinside-a-long-token"])
def test_a_weak_token_is_refused(pg_dsn: str, schema: str, token: str) -> None:
    with pytest.raises(Exception, match="at least 16 characters"):
        create_app(Target(pg_dsn, schema).saver, token=token)
    refused = CliRunner().invoke(cli, ["--dsn", pg_dsn, "--schema", schema, "serve", "--host", "0.0.0.0", "--token", token])
    assert refused.exit_code == 2 and "--token" in refused.output and "16 characters" in refused.output
    from_env = CliRunner().invoke(cli, ["--dsn", pg_dsn, "--schema", schema, "serve"], env={"LGPD_TOKEN": token})
    assert from_env.exit_code == 2 and "LGPD_TOKEN" in from_env.output


def _serve(
    monkeypatch: pytest.MonkeyPatch, pg_dsn: str, schema: str, *args: str, env: dict[str, str] | None = None, check: Any = None
) -> tuple[dict[str, Any], str]:
    """`lgpd serve ARGS` up to the server's start, where `check(app)` runs on the app it
    built (its saver open): uvicorn's options, and what it printed."""
    started: dict[str, Any] = {}

    def run(app: Any, **options: Any) -> None:
        started.update(options)
        if check is not None:
            check(app)

    monkeypatch.setattr(uvicorn, "run", run)
    result = CliRunner().invoke(cli, ["--dsn", pg_dsn, "--schema", schema, "serve", *args], env=env)
    assert result.exit_code == 0 and result.exception is None, (result.output, result.exception)
    return started, result.output


def test_serve_makes_a_token_and_prints_it_once_as_a_link(monkeypatch: pytest.MonkeyPatch, pg_dsn: str, schema: str) -> None:
    printed: list[str] = []

    def check(app: Any) -> None:
        token = printed[0].rpartition("?token=")[2] if printed else ""
        with TestClient(app, base_url=LOCAL) as client:
            assert client.get("/api/threads").status_code == 401
            assert client.get("/", headers={"Host": "evil.example:8765"}).status_code == 421
            assert len(token) >= 43 and client.get("/api/threads", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    monkeypatch.setattr("builtins.print", lambda *a, **k: printed.append(" ".join(map(str, a))))
    options, _ = _serve(monkeypatch, pg_dsn, schema, "--port", "8765", check=check)
    monkeypatch.undo()
    assert options["host"] == "127.0.0.1" and options["port"] == 8765
    assert len(printed) == 1 and printed[0].startswith("lgpd serve: open http://127.0.0.1:8765/?token=")
    _, again = _serve(monkeypatch, pg_dsn, schema)
    assert printed[0].rpartition("?token=")[2] not in again  # a new one each start


def test_serve_never_prints_a_token_it_was_given(monkeypatch: pytest.MonkeyPatch, pg_dsn: str, schema: str) -> None:
    _, printed = _serve(monkeypatch, pg_dsn, schema, "--token", TOKEN)
    assert TOKEN not in printed and "--token" in printed
    _, printed = _serve(monkeypatch, pg_dsn, schema, env={"LGPD_TOKEN": TOKEN})
    assert TOKEN not in printed


def test_serve_without_a_token_only_on_loopback(monkeypatch: pytest.MonkeyPatch, pg_dsn: str, schema: str) -> None:
    def check(app: Any) -> None:
        with TestClient(app, base_url=LOCAL) as client:
            assert client.get("/api/threads").status_code == 200
            assert client.get("/api/threads", headers={"Host": "evil.example"}).status_code == 421  # the Host check still holds

    _, printed = _serve(monkeypatch, pg_dsn, schema, "--no-token", check=check)
    assert "no token" in printed and "?token=" not in printed
    refused = CliRunner().invoke(cli, ["--dsn", pg_dsn, "--schema", schema, "serve", "--host", "0.0.0.0", "--no-token"])
    assert refused.exit_code == 2 and "--no-token" in refused.output


def test_serve_on_a_network_answers_its_names_with_a_secure_cookie(monkeypatch: pytest.MonkeyPatch, pg_dsn: str, schema: str) -> None:
    def check(app: Any) -> None:
        with TestClient(app, base_url="http://lab.internal:8765") as client:
            first = client.get(f"/?token={TOKEN}", follow_redirects=False)
            assert first.status_code == 303 and "; Secure" in first.headers["set-cookie"]
            assert client.get("/", headers={"Host": "evil.example"}).status_code == 421

    options, printed = _serve(
        monkeypatch, pg_dsn, schema, "--host", "0.0.0.0", "--token", TOKEN, "--allow-host", "lab.internal", check=check
    )
    assert options["host"] == "0.0.0.0" and TOKEN not in printed
    refused = CliRunner().invoke(cli, ["--dsn", pg_dsn, "--schema", schema, "serve", "--allow-host", "http://x/"])
    assert refused.exit_code == 2 and "--allow-host" in refused.output


# -- ids in URLs -----------------------------------------------------------------------------


def test_a_slash_in_a_thread_id_never_reroutes(client: TestClient) -> None:
    page = client.get("/threads/a%2Fb")
    assert page.status_code == 200 and "<h1><bdi>a/b</bdi></h1>" in page.text
    assert 'href="/threads/a%2Fb/steps/1"' in page.text
    assert client.get("/threads/a%2Fb/steps/1").status_code == 200
    # Thread "calc-1/steps/1" is its own thread, not step 1 of calc-1.
    own = client.get("/api/threads/calc-1%2Fsteps%2F1/steps/0").json()
    assert own["thread_id"] == "calc-1/steps/1"
    assert client.get("/api/threads/calc-1%2Fsteps%2F1/runs").json()["thread_id"] == "calc-1/steps/1"
    assert "<h1><bdi>calc-1/steps/1</bdi></h1>" in client.get("/threads/calc-1%2Fsteps%2F1").text
    assert client.get("/threads/nobody%2Fsteps%2F1").status_code == 404  # not step 1 of "nobody"


def test_every_id_in_a_link_is_encoded(client: TestClient) -> None:
    html = client.get("/threads/odd-ids/steps/-1").text
    sources = [part.split('"', 1)[0] for part in html.split('data-src="')[1:]]
    assert sources and all("&checkpoint=other" not in src.replace("&amp;", "&") for src in sources)
    assert f"/state?checkpoint={quote(HOSTILE_CHECKPOINT, safe='')}" in sources[0]
    state = client.get(f"/api/threads/odd-ids/state?checkpoint={quote(HOSTILE_CHECKPOINT, safe='')}").json()
    assert state["checkpoint_id"] == HOSTILE_CHECKPOINT


def test_ids_are_isolated_for_bidi(client: TestClient) -> None:
    thread = f"evil{RTL}gnp.exe"
    html = client.get(f"/threads/{quote(thread, safe='')}").text
    assert f"<title>\u2068{thread}\u2069 · lgpd</title>" in html
    assert f"<h1><bdi>{thread}</bdi></h1>" in html and f'<span class="crumb"><bdi>{thread}</bdi></span>' in html
    listing = client.get("/").text
    assert f"<bdi>{thread}</bdi></a>" in listing


# -- parameters ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/?since=99999999999d", "since"),
        ("/api/threads?since=99999999999d", "since"),
        ("/api/threads?until=1e400d", "until"),
        ("/threads/calc-1/steps/1?against=--1", "against"),
        ("/threads/calc-1/steps/1?against=%C2%B2", "against"),
        ("/threads/calc-1/steps/1?against=99999999999", "against"),
        ("/threads/calc-1/steps/1?internals=maybe", "internals"),
        ("/threads/calc-1/steps/%C2%B2", "step"),
        ("/threads/calc-1/steps/99999999999", "step"),
        ("/api/threads/calc-1/steps/1?full=2", "full"),
        ("/api/threads?limit=-1", "limit"),
        ("/api/threads?limit=1_0", "limit"),
        ("/api/threads/calc-1/diff?from=x", "from"),
        ("/api/threads/many-runs/runs?before=yesterday", "before"),
        ("/threads/many-runs?runs_before=nope", "runs_before"),
        ("/?status=finished", "status"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(client: TestClient, path: str, named: str) -> None:
    response = client.get(path)
    assert response.status_code == 400, (path, response.status_code, response.text[:300])
    assert named in response.text


def test_runs_come_a_page_at_a_time(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    first = client.get("/api/threads/many-runs/runs?limit=3").json()
    assert len(first["runs"]) == 3 and first["next_before"]
    seen = [r["run_id"] for r in first["runs"]]
    cursor = first["next_before"]
    while cursor:
        page = client.get(f"/api/threads/many-runs/runs?limit=3&before={quote(cursor, safe='')}").json()
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next_before"]
    assert len(seen) == len(set(seen)) == 7
    import langgraph_pg_durable.web.pages as pages

    monkeypatch.setattr(pages, "RUNS", 5)
    html = client.get("/threads/many-runs").text
    assert html.count('<li><span class="badge') == 5 and 'id="older-runs"' in html
    older = html.split('id="older-runs" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    rest = client.get(f"/threads/many-runs{older}")
    assert rest.status_code == 200 and rest.text.count('<li><span class="badge') == 2 and 'id="older-runs"' not in rest.text
