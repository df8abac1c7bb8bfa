"""Which of the core's modules run compiled (mypyc, see setup.py), and the way back to source.

A build that compiled the core wrote `core/_compiled.json`: each compiled module and the
digest of the source it was compiled from. Python loads a module's compiled file before
its source, so in an editable install an edited source would not run until the next
build; and the compiled modules call each other directly, past any one of them loaded
from source. `use_source_when_stale`, run before the core is imported, therefore loads
every one of them from source, all or none, when a source differs from what was compiled,
when a compiled file is not the build's, or when `LGPD_PURE_PYTHON=1` asks for the pure
modules. Nothing else changes: the two are the same Python.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

CORE = Path(__file__).resolve().parent / "core"
PACKAGE = f"{__package__}.core"
MANIFEST_NAME = "_compiled.json"
PURE = "LGPD_PURE_PYTHON"


class FromSource:
    """A meta-path finder that gives the listed modules their source's spec."""

    def __init__(self, sources: Mapping[str, Path]) -> None:
        self.sources = dict(sources)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        source = self.sources.get(fullname)
        if source is None:
            return None
        loader = importlib.machinery.SourceFileLoader(fullname, str(source))
        return importlib.util.spec_from_file_location(fullname, source, loader=loader)


def listed(core: Path = CORE) -> dict[str, str]:
    """The modules the build compiled and their sources' digests then; {} when none was."""
    try:
        modules = json.loads((core / MANIFEST_NAME).read_text())["modules"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(modules, dict):
        return {}
    return {name: digest for name, digest in modules.items() if isinstance(name, str) and isinstance(digest, str)}


def compiled_files(core: Path = CORE) -> list[str]:
    """The names of the modules that have a compiled file beside their source."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    names = {path.name.split(".", 1)[0] for path in core.iterdir() if path.name.endswith(suffixes)}
    return sorted(name for name in names if (core / f"{name}.py").exists())


def stale(core: Path = CORE, package: str = PACKAGE, build: Mapping[str, str] | None = None) -> list[str]:
    """The compiled modules whose source is not what they were compiled from (`build`: the
    manifest's modules, when the caller read them already)."""
    out = []
    for name, digest in (listed(core) if build is None else build).items():
        try:
            now = hashlib.sha256((core / f"{name.removeprefix(package + '.')}.py").read_bytes()).hexdigest()
        except OSError:
            continue  # no source beside it (an install without sources): the compiled one stands
        if now != digest:
            out.append(name)
    return out


def use_source_when_stale(core: Path = CORE, package: str = PACKAGE) -> FromSource | None:
    """Put a `FromSource` for every compiled module first on `sys.meta_path` when they must
    load from source (see the module), and return it; None when the compiled ones stand."""
    files = {f"{package}.{name}" for name in compiled_files(core)}
    if not files:
        return None
    build = listed(core)
    if os.environ.get(PURE) != "1" and files <= build.keys() and not stale(core, package, build):
        return None
    for finder in sys.meta_path:
        if isinstance(finder, FromSource):
            return finder
    sources = {name: core / f"{name.removeprefix(package + '.')}.py" for name in sorted(files | build.keys())}
    finder = FromSource({name: path for name, path in sources.items() if path.exists()})
    sys.meta_path.insert(0, finder)
    return finder


def running_compiled(core: Path = CORE, package: str = PACKAGE) -> list[str]:
    """The core's modules imported from a compiled file (what this process runs)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    out = []
    for name in compiled_files(core):
        module = sys.modules.get(f"{package}.{name}")
        if module is not None and str(getattr(module, "__file__", "")).endswith(suffixes):
            out.append(f"{package}.{name}")
    return out
