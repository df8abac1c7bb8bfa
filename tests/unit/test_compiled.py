"""The way back from the compiled core to its source (langgraph_pg_durable/compiled.py):
all or none, whenever what was compiled is not what the sources say."""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from langgraph_pg_durable import compiled

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
PACKAGE = "fakepkg.core"


@pytest.fixture(autouse=True)
def _meta_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts without a FromSource finder and leaves none behind."""
    monkeypatch.delenv(compiled.PURE, raising=False)
    before = list(sys.meta_path)
    sys.meta_path[:] = [f for f in before if not isinstance(f, compiled.FromSource)]
    yield
    sys.meta_path[:] = before


def build(core: Path, names: list[str], *, compiled_names: list[str] | None = None, manifest: bool = True) -> None:
    """A core folder as a build leaves it: sources, compiled files, the manifest of digests."""
    core.mkdir(exist_ok=True)
    for name in names:
        (core / f"{name}.py").write_text(f"NAME = {name!r}\n")
    for name in names if compiled_names is None else compiled_names:
        (core / f"{name}{SUFFIX}").write_bytes(b"\x7fELF")
    if manifest:
        digests = {f"{PACKAGE}.{n}": hashlib.sha256((core / f"{n}.py").read_bytes()).hexdigest() for n in names}
        (core / compiled.MANIFEST_NAME).write_text(json.dumps({"modules": digests}))


def use(core: Path) -> compiled.FromSource | None:
    return compiled.use_source_when_stale(core, PACKAGE)


def test_a_build_whose_sources_are_unchanged_runs_compiled(tmp_path: Path) -> None:
    build(tmp_path, ["encode", "actions"])
    assert use(tmp_path) is None
    assert not any(isinstance(f, compiled.FromSource) for f in sys.meta_path)


def test_a_pure_package_needs_nothing(tmp_path: Path) -> None:
    build(tmp_path, ["encode"], compiled_names=[], manifest=False)
    assert use(tmp_path) is None


def test_one_edited_source_sends_every_compiled_module_to_its_source(tmp_path: Path) -> None:
    build(tmp_path, ["encode", "actions", "keys"])
    (tmp_path / "actions.py").write_text("NAME = 'edited'\n")
    assert compiled.stale(tmp_path, PACKAGE) == [f"{PACKAGE}.actions"]
    finder = use(tmp_path)
    assert finder is not None and sys.meta_path[0] is finder
    assert sorted(finder.sources) == [f"{PACKAGE}.actions", f"{PACKAGE}.encode", f"{PACKAGE}.keys"]
    spec = finder.find_spec(f"{PACKAGE}.encode")
    assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)
    assert spec.origin == str(tmp_path / "encode.py")
    assert finder.find_spec("fakepkg.other") is None


def test_a_compiled_file_the_manifest_does_not_list_is_not_trusted(tmp_path: Path) -> None:
    build(tmp_path, ["encode"])
    build(tmp_path, ["chunks"], manifest=False)  # left by an earlier build that compiled more
    finder = use(tmp_path)
    assert finder is not None and set(finder.sources) == {f"{PACKAGE}.encode", f"{PACKAGE}.chunks"}


def test_compiled_files_without_a_manifest_load_from_source(tmp_path: Path) -> None:
    build(tmp_path, ["encode"], manifest=False)  # a pure build after a compiled one
    finder = use(tmp_path)
    assert finder is not None and set(finder.sources) == {f"{PACKAGE}.encode"}


@pytest.mark.parametrize("manifest", ["{not json", '{"modules": ["a"]}', '{"other": {}}', '{"modules": {"a": 1}}'])
def test_a_malformed_manifest_counts_as_none(tmp_path: Path, manifest: str) -> None:
    build(tmp_path, ["encode"], manifest=False)
    (tmp_path / compiled.MANIFEST_NAME).write_text(manifest)
    assert compiled.listed(tmp_path) == {}
    assert use(tmp_path) is not None


def test_the_environment_can_ask_for_the_pure_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build(tmp_path, ["encode"])
    monkeypatch.setenv(compiled.PURE, "1")
    assert use(tmp_path) is not None


def test_the_finder_is_put_in_place_once(tmp_path: Path) -> None:
    build(tmp_path, ["encode"], manifest=False)
    first = use(tmp_path)
    assert use(tmp_path) is first
    assert sum(isinstance(f, compiled.FromSource) for f in sys.meta_path) == 1


def test_this_install_runs_the_core_compiled_when_ci_requires_it() -> None:
    """CI (`.ci/run`, LGPD_REQUIRE_COMPILED=1) builds with a compiler: every module the
    build lists runs compiled, so a build that fell back to the pure modules (the
    extensions are optional) or a stale one does not pass for compiled."""
    if os.environ.get("LGPD_REQUIRE_COMPILED") != "1":
        pytest.skip("set LGPD_REQUIRE_COMPILED=1 to require the compiled core (CI does)")
    import langgraph_pg_durable.core.encode  # noqa: F401  (the core, imported as the saver imports it)

    built = sorted(compiled.listed())
    assert built, "the build compiled nothing (no core/_compiled.json)"
    assert compiled.stale() == []
    for name in built:
        importlib.import_module(name)
    assert compiled.running_compiled() == built
    from langgraph_pg_durable.core import identity

    assert identity.SAME_ITEMS is not None, "core/_heads.c did not build"
