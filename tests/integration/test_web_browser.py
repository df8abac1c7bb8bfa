"""The replay page in a real browser: Debian's Chromium, driven by Selenium, against the
app `lgpd serve` runs, on a database of real agent runs.

A person opens the threads page, a thread, a step: the tool call and its result are shown
together, a `<script>` in a message is shown as text (and never runs), the diff marks an
edited message, and a step committed while the thread page is open appears without a
reload. The guard holds in the browser too: a page on a name rebound to 127.0.0.1 reads
nothing, a foreign page cannot frame the replay page, and the token link leaves no token
behind in the address bar. Without Chromium the tests skip, unless $LGPD_REQUIRE_BROWSER is
set (as .ci/run does, after installing it). With $LGPD_SCREENSHOTS=DIR they save the
README's screenshots.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage
from langgraph.types import Command
from psycopg import sql

import agents
from langgraph_pg_durable import DurablePostgresSaver
from langgraph_pg_durable.cli.target import Target
from langgraph_pg_durable.web import create_app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    if os.environ.get("LGPD_REQUIRE_BROWSER"):
        raise RuntimeError("the browser tests need chromium and chromium-driver: apt-get install -y chromium chromium-driver")
    pytest.skip("no chromium / chromedriver (apt-get install -y chromium chromium-driver)", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT_SECONDS = 30  # the longest a page may take to show what it must; not a pause
REBOUND = "evil.example"  # the browser resolves it to 127.0.0.1, as a rebound name would
TOKEN = "browser-test-token-0123456789"


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = f"lgpd_browser_{uuid.uuid4().hex[:12]}"
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=name) as saver:
        saver.setup()
        agents.sample_threads(saver)
        graph = agents.tool_agent(saver, agents.calculator_replies())
        config = {"configurable": {"thread_id": "edit-1"}}
        graph.invoke({"messages": [("user", "<script>alert('x')</script> what is 1+2?")]}, config, durability="sync")
        graph.update_state(config, {"messages": [AIMessage("1 + 2 = three", id="ai-2")]})
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@contextmanager
def serving(pg_dsn: str, schema: str, **options: Any) -> Iterator[str]:
    """The app (`create_app` with `options`) on a socket bound before the browser starts: a
    request waits in its backlog until the server accepts it, so nothing waits for the
    server to come up."""
    import uvicorn

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(64)
    port = listening.getsockname()[1]
    app = create_app(Target(pg_dsn, schema).saver, schema=schema, **options)
    running = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=running.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        running.should_exit = True
        thread.join(timeout=WAIT_SECONDS)
        listening.close()


@pytest.fixture(scope="module")
def server(pg_dsn: str, schema: str) -> Iterator[str]:
    with serving(pg_dsn, schema) as url:
        yield url


@pytest.fixture(scope="module")
def token_server(pg_dsn: str, schema: str) -> Iterator[str]:
    with serving(pg_dsn, schema, token=TOKEN) as url:
        yield url


@contextmanager
def foreign_site(html: str) -> Iterator[str]:
    """Another site on this machine serving `html` at `/`, from a socket bound (by the
    stdlib server's constructor) before the browser opens it; shut down on leaving."""
    body = html.encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}/"
    finally:
        site.shutdown()
        site.server_close()
        thread.join(timeout=WAIT_SECONDS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    yield driver
    driver.quit()


def shoot(browser: Any, name: str) -> None:
    folder = os.environ.get("LGPD_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / name))


def test_a_person_opens_a_thread_and_a_step(server: str, browser: Any) -> None:
    browser.get(server + "/")
    browser.find_element(By.LINK_TEXT, "calc-1").click()
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: d.current_url.endswith("/threads/calc-1"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#steps tbody tr")) == 8
    shoot(browser, "thread.png")
    browser.find_element(By.CSS_SELECTOR, 'a[href="/threads/calc-1/steps/1"]').click()
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: d.current_url.endswith("/steps/1"))
    call = browser.find_element(By.CSS_SELECTOR, '.call[data-call="call-1"]')
    assert call.find_element(By.CSS_SELECTOR, ".tool").text == "add"
    assert call.find_element(By.CSS_SELECTOR, ".result pre").text == "3"  # the result beside its call
    assert '"a": 1' in call.find_element(By.CSS_SELECTOR, ".args").text
    shoot(browser, "step.png")
    state = browser.find_element(By.CSS_SELECTOR, 'details[data-src*="/state?"]')
    state.find_element(By.TAG_NAME, "summary").click()  # the full state, fetched on demand
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: "what is 1+2?" in state.find_element(By.CSS_SELECTOR, "pre.lazy").text)
    browser.find_element(By.TAG_NAME, "body").send_keys("j")  # the next step, from the keyboard
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: d.current_url.endswith("/steps/2"))


def test_a_script_in_a_message_is_text(server: str, browser: Any) -> None:
    browser.get(server + "/threads/edit-1/steps/1")
    user = browser.find_element(By.CSS_SELECTOR, ".prompt .msg.user .text")
    assert user.text.startswith("<script>alert('x')</script>")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - the script never ran
    assert browser.find_elements(By.CSS_SELECTOR, "main script") == []


def test_the_diff_marks_an_edited_message(server: str, browser: Any) -> None:
    browser.get(server + "/threads/edit-1/steps/4")
    edited = browser.find_elements(By.CSS_SELECTOR, ".diff .change.edited")
    assert len(edited) == 1
    texts = [t.text for t in edited[0].find_elements(By.CSS_SELECTOR, ".text")]
    assert texts == ["1 + 2 = 3", "1 + 2 = three"]


def test_a_step_committed_while_the_page_is_open_appears(server: str, browser: Any, pg_dsn: str, schema: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        graph = agents.approval(saver)
        config = {"configurable": {"thread_id": "live-1"}}
        graph.invoke({"item": "book"}, config, durability="sync")
        browser.get(server + "/threads/live-1")
        before = len(browser.find_elements(By.CSS_SELECTOR, "#steps tbody tr"))
        marker = browser.execute_script("document.body.dataset.loadedOnce = 'yes'; return document.body.dataset.loadedOnce")
        graph.invoke(Command(resume="yes"), config, durability="sync")  # committed while the page is open
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#steps tbody tr")) > before)
    assert browser.execute_script("return document.body.dataset.loadedOnce") == marker  # no reload happened
    newest = browser.find_element(By.CSS_SELECTOR, "#steps tbody tr")
    assert "approve" in newest.text


def test_a_live_step_names_its_reply_and_tokens_as_the_server_does(server: str, browser: Any, pg_dsn: str, schema: str) -> None:
    with DurablePostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        graph = agents.tool_agent(saver, agents.calculator_replies())
        config = {"configurable": {"thread_id": "live-calc"}}
        graph.invoke({"messages": [("user", "what is 1+2?")]}, config, durability="sync")
        browser.get(server + "/threads/live-calc")
        served = browser.find_element(By.CSS_SELECTOR, "#steps tbody tr").text  # step 3, drawn by the server
        before = len(browser.find_elements(By.CSS_SELECTOR, "#steps tbody tr"))
        graph.invoke({"messages": [("user", "thanks")]}, config, durability="sync")
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#steps tbody tr")) > before)
    newest = browser.find_element(By.CSS_SELECTOR, "#steps tbody tr")  # step 6, drawn by the page's script
    reply = newest.find_element(By.CSS_SELECTOR, "q.reply")
    assert reply.text == "You're welcome." and "34" in newest.text and "ms" in newest.text
    assert "1 + 2 = 3" in served and "26" in served


def test_a_page_on_a_rebound_name_reads_nothing(server: str, browser: Any) -> None:
    """DNS rebinding: a name the attacker controls, rebound to 127.0.0.1, reaches the
    server, but neither its pages nor a script on that name's origin read a thread."""
    rebound = server.replace("127.0.0.1", REBOUND)
    browser.get(rebound + "/")
    shown = browser.find_element(By.TAG_NAME, "body").text
    assert "421" in shown and "is not this server's name" in shown
    assert "calc-1" not in browser.page_source
    browser.get(rebound + "/api/threads")
    assert "is not this server's name" in browser.find_element(By.TAG_NAME, "body").text
    assert "calc-1" not in browser.page_source
    read = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch('/api/threads').then(r => r.text().then(t => done([r.status, t])), e => done([0, String(e)]));"
    )
    assert read[0] == 421 and "calc-1" not in read[1]
    browser.get(server + "/")
    assert browser.find_elements(By.LINK_TEXT, "calc-1")


def test_a_foreign_page_cannot_frame_the_replay_page(server: str, browser: Any) -> None:
    """Clickjacking: a page of another origin frames a thread; the browser refuses to show
    the replay page in the frame (frame-ancestors 'none', X-Frame-Options DENY) and says why."""
    frame = f"""<iframe id="f" src="{server}/threads/calc-1" onload="document.title = 'framed'"></iframe>"""
    browser.get_log("browser")
    logged: list[str] = []

    def refusal_logged(driver: Any) -> bool:
        logged.extend(entry["message"] for entry in driver.get_log("browser"))
        return any("frame-ancestors" in m or "X-Frame-Options" in m for m in logged)

    with foreign_site(f"<!doctype html><title>foreign</title>{frame}") as foreign:
        browser.get(foreign)
        WebDriverWait(browser, WAIT_SECONDS).until(lambda d: d.title == "framed")
        browser.switch_to.frame("f")
        try:
            inside = browser.page_source
        finally:
            browser.switch_to.default_content()
        assert "calc-1" not in inside and 'class="brand"' not in inside
        WebDriverWait(browser, WAIT_SECONDS).until(refusal_logged)


def test_the_token_link_leaves_no_token_behind(token_server: str, browser: Any) -> None:
    """`?token=` is traded for an HttpOnly session cookie (not the token) and a redirect to
    the same page without it: the token is not in the address bar, history or the cookie a
    script reads; the cookie opens the other pages, and without it the server refuses."""
    port = token_server.rsplit(":", 1)[1]
    browser.delete_all_cookies()
    browser.get(f"{token_server}/threads/calc-1?token={TOKEN}")
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#steps tbody tr"))
    assert browser.current_url == token_server + "/threads/calc-1"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#steps tbody tr")) == 8
    seen_by_script = browser.execute_script("return [document.cookie, location.href, JSON.stringify(history.state)]")
    assert not any(TOKEN in seen or "lgpd_" in seen for seen in seen_by_script)
    session = browser.get_cookie(f"lgpd_session_{port}")
    assert session is not None and session["httpOnly"] and TOKEN not in session["value"]
    assert [c["name"] for c in browser.get_cookies()] == [session["name"]]
    browser.get(token_server + "/")
    assert browser.find_elements(By.LINK_TEXT, "calc-1")
    browser.delete_all_cookies()
    browser.get(token_server + "/")
    shown = browser.find_element(By.TAG_NAME, "body").text
    assert "401" in shown and "a token is required" in shown
    assert "calc-1" not in browser.page_source


def test_the_token_link_works_when_followed_from_another_site(token_server: str, browser: Any) -> None:
    """A link to `?token=` on another site (a chat, a notebook on localhost): the browser
    would not send a SameSite=Strict cookie on a redirect that site started, so the server
    answers with a page that moves on by itself, and the thread shows without the token."""
    browser.delete_all_cookies()
    link = f'<a id="go" href="{token_server}/threads/calc-1?token={TOKEN}">open</a>'
    with foreign_site(f"<!doctype html><title>chat</title>{link}") as foreign:
        browser.get(foreign.replace("127.0.0.1", REBOUND))
        browser.find_element(By.ID, "go").click()
        WebDriverWait(browser, WAIT_SECONDS).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#steps tbody tr"))
    assert browser.current_url == token_server + "/threads/calc-1"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#steps tbody tr")) == 8
