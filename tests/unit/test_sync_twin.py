"""Each sync twin is generated from its async source and must be what the generator gives."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "async_to_sync.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


@pytest.mark.parametrize(("source", "target"), GENERATOR.TWINS, ids=lambda p: p.name)
def test_sync_twin_is_generated_from_its_source(source: Path, target: Path) -> None:
    text = target.read_text()
    assert text.splitlines()[0] == (f"# Generated from langgraph_pg_durable/{source.name} by tools/async_to_sync.py: do not edit.")
    assert text == GENERATOR.generate(source), f"{target.name} is stale: run python tools/async_to_sync.py"


def test_check_passes_when_every_twin_is_current() -> None:
    check = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_check_fails_naming_a_stale_twin(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    (aio, _), (objects_async, _) = GENERATOR.TWINS
    stale = tmp_path / "objects.py"
    stale.write_text(GENERATOR.generate(objects_async) + "# edited by hand\n")
    current = tmp_path / "saver.py"
    current.write_text(GENERATOR.generate(aio))
    monkeypatch.setattr(GENERATOR, "TWINS", [(aio, current), (objects_async, stale)])
    assert GENERATOR.main(["--check"]) == 1
    assert stale.read_text().endswith("# edited by hand\n")  # --check writes nothing
    errors = capsys.readouterr().err
    assert str(stale) in errors and str(current) not in errors
