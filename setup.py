"""The build: the sans-I/O core's hot modules compiled to C with mypyc, when it can.

Everything else is in pyproject.toml. The modules below are plain typed Python that
mypyc compiles as they are: a durable step runs through them (the parameters of a put and
of a put_writes, the action row, the metadata, the codec), and compiled they cost the
client about a tenth fewer instructions a step (`tools/step_instructions.py`).

`LGPD_PURE_PYTHON=1` at install builds nothing: the package is the same Python either
way. A build that cannot compile (no C compiler) warns and installs the pure modules.
The build writes `langgraph_pg_durable/core/_compiled.json`, each compiled module's source
digest: at import, an edited source (an editable install, before it is built again) makes
every module load from its source instead (`langgraph_pg_durable/compiled.py`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
CORE = "langgraph_pg_durable/core"
COMPILED = [
    "actions",
    "backfill",
    "codec",
    "decode",
    "delta_history",
    "durability",
    "effects",
    "encode",
    "fencing",
    "history",
    "identity",
    "keys",
    "lists",
    "metadata",
    "msgpack_bounds",
    "offload",
    "params",
    "runs",
    "type_policy",
]
MANIFEST = ROOT / CORE / "_compiled.json"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# The commands that build the package's files; pip also runs this file to learn the
# package's metadata (egg_info, dist_info), which needs no compile (~a minute each).
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop"}


def _extensions() -> list:
    if not BUILDS.intersection(sys.argv[1:]):
        return []
    MANIFEST.unlink(missing_ok=True)
    if os.environ.get("LGPD_PURE_PYTHON") == "1":
        return []
    from mypyc.build import mypycify

    paths = [f"{CORE}/{name}.py" for name in COMPILED]
    # The digests of the sources as they are before the compile reads them: a source
    # edited while it builds then reads as changed, and loads from source at import.
    modules = {f"langgraph_pg_durable.core.{name}": _digest(ROOT / CORE / f"{name}.py") for name in COMPILED}
    # Third-party types are left to run time (Any): the build environment holds mypy alone,
    # and the repository's own mypy run (`mypy`, strict on the core) checks the types; here
    # the modules the core imports are read for their types, their findings not reported.
    # (The group's shared library goes in the package, as langgraph_pg_durable/core__mypyc.)
    options = ["--config-file=", "--ignore-missing-imports", "--follow-imports=silent"]
    extensions = mypycify([*options, *paths], opt_level="3", group_name="langgraph_pg_durable.core")
    # And one module written in C: a list's items compared by identity without touching
    # them (core/_heads.c, used by core/identity.py), which no Python code can do. Its
    # source's digest is built in (SOURCE_SHA256), for a test to catch a stale build.
    heads = f"{CORE}/_heads.c"
    digest = f'"{_digest(ROOT / heads)}"'
    extensions.append(Extension("langgraph_pg_durable.core._heads", [heads], define_macros=[("SOURCE_SHA256", digest)]))
    for extension in extensions:
        extension.optional = True  # no compiler: a warning, and the pure modules
    MANIFEST.write_text(json.dumps({"modules": modules}, indent=1) + "\n")
    return extensions


class BuildExt(build_ext):
    """build_ext that leaves no manifest unless every compiled module built.

    The extensions are optional: one that fails to compile leaves a warning, and its module
    would load from source while the compiled ones call their own compiled copy of it. With
    no manifest, `compiled.use_source_when_stale` loads every module from source instead.
    """

    def run(self) -> None:
        super().run()
        if all(os.path.exists(self.get_ext_fullpath(extension.name)) for extension in self.extensions):
            return
        MANIFEST.unlink(missing_ok=True)
        built = Path(self.build_lib) / CORE / MANIFEST.name
        built.unlink(missing_ok=True)
        print("langgraph-pg-durable: a compiled module did not build; the core runs as pure Python", file=sys.stderr)


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
