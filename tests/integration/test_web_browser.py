"""The replay page in a real browser: Debian's Chromium, driven by Selenium, against the
app `lgpd serve` runs, on a database of real agent runs.

A person opens the threads page, a thread, a step: the tool call and its result are shown
together, a `<script>` in a message is shown as text (and never runs), the diff marks an
edited message, and a step committed while the thread page is open appears without a
reload. Without Chromium the tests skip, unless $LGPD_REQUIRE_BROWSER is set (as .ci/run
does, after installing it). With $LGPD_SCREENSHOTS=DIR they save the README's screenshots.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
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


@pytest.fixture(scope="module")
def server(pg_dsn: str, schema: str) -> Iterator[str]:
    """The app on a socket bound before the browser starts: a request waits in its backlog
    until the server accepts it, so nothing waits for the server to come up."""
    import uvicorn

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(64)
    port = listening.getsockname()[1]
    app = create_app(Target(pg_dsn, schema).saver, schema=schema)
    running = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=running.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    running.should_exit = True
    thread.join(timeout=WAIT_SECONDS)
    listening.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(flag)
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
