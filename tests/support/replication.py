"""A primary and a streaming standby on 127.0.0.1, for failover tests.

Built from the system's PostgreSQL binaries (initdb, then `pg_basebackup -R` for the
standby), run as an unprivileged user when we are root. Replication is synchronous
(`synchronous_standby_names = '*'`, set on the primary only, after the base backup, so
the standby never inherits it) or asynchronous. A test kills the primary's postmaster
with SIGKILL, as a machine lost in production would go, and promotes the standby; or it
cuts the standby off first, so that the commits the primary acknowledged since are lost
by the failover.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

from pg_server import _ensure_user, _free_port, _runner, _system_bindir, wait_until_ready

USER = "lgpgtest"
POLL = 0.05  # seconds between two looks at a server's state (never a guess at a duration)
STATE_TIMEOUT = 60.0  # for a state a server reaches on its own (a standby streaming, caught up)

__all__ = ["ReplicaPair", "start_replica_pair"]


class ReplicaPair:
    """A primary, its streaming standby, and the moves of a failover."""

    def __init__(self, base: Path, run, primary_port: int, standby_port: int, synchronous: bool) -> None:  # noqa: ANN001
        self.base = base
        self._run = run
        self.primary_port = primary_port
        self.standby_port = standby_port
        self.synchronous = synchronous
        self.primary_data = base / "primary"
        self.standby_data = base / "standby"
        self._primary_pids: set[int] = set()
        self._standby_conninfo: str | None = None

    # -- addresses ---------------------------------------------------------------------

    def node_dsn(self, port: int, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={port} user=postgres dbname={dbname}"

    @property
    def primary_dsn(self) -> str:
        return self.node_dsn(self.primary_port)

    @property
    def standby_dsn(self) -> str:
        return self.node_dsn(self.standby_port)

    def dsn(self, dbname: str = "postgres") -> str:
        """The connection string an application uses: both hosts, the writable one wanted."""
        return (
            f"host=127.0.0.1,127.0.0.1 port={self.primary_port},{self.standby_port} "
            f"user=postgres dbname={dbname} target_session_attrs=read-write"
        )

    # -- the moves of a test -------------------------------------------------------------

    def create_database(self, name: str) -> None:
        """A database on the primary, there on the standby once it has replayed it."""
        with psycopg.connect(self.primary_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.wait_caught_up()

    def wait_caught_up(self) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        with psycopg.connect(self.primary_dsn, autocommit=True) as conn:
            target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        self._until(
            self.standby_dsn,
            "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
            (target,),
            f"the standby did not replay up to {target}",
        )

    def cut_standby_off(self) -> None:
        """Stop the standby's streaming (its walreceiver ends): what the primary commits
        from now on is on the primary alone."""
        with psycopg.connect(self.standby_dsn, autocommit=True) as conn:
            self._standby_conninfo = conn.execute("SHOW primary_conninfo").fetchone()[0]
            conn.execute("ALTER SYSTEM SET primary_conninfo = ''")
            conn.execute("SELECT pg_reload_conf()")
        self._until(self.standby_dsn, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver)", (), "the walreceiver did not stop")
        self._until(
            self.primary_dsn,
            "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_replication)",
            (),
            "the primary still lists the standby",
        )

    def reconnect_standby(self) -> None:
        """Undo cut_standby_off: the standby streams again."""
        assert self._standby_conninfo is not None, "the standby was not cut off"
        with psycopg.connect(self.standby_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER SYSTEM SET primary_conninfo = {}").format(sql.Literal(self._standby_conninfo)))
            conn.execute("SELECT pg_reload_conf()")
        self.wait_streaming()

    def wait_streaming(self) -> None:
        """Until the primary lists the standby as streaming (and, synchronous, as sync)."""
        state = "sync" if self.synchronous else "async"
        self._until(
            self.primary_dsn,
            "SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = %s)",
            (state,),
            f"the standby is not streaming as {state}",
        )

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster: its backends notice and end, connections drop."""
        pid = int((self.primary_data / "postmaster.pid").read_text().split()[0])
        self._primary_pids = {pid, *_children(pid)}
        os.kill(pid, signal.SIGKILL)

    def promote(self) -> None:
        """Promote the standby (returns once it accepts writes)."""
        self._run("pg_ctl", "-D", self.standby_data, "-w", "-t", "60", "promote")
        self._until(self.standby_dsn, "SELECT NOT pg_is_in_recovery()", (), "the standby did not leave recovery")

    def stop(self) -> None:
        """Stop both servers (what is left of them) and delete their data; idempotent."""
        for data in (self.standby_data, self.primary_data):
            if (data / "postmaster.pid").exists():
                try:
                    self._run("pg_ctl", "-D", data, "-m", "immediate", "-w", "-t", "30", "stop")
                except Exception:  # noqa: BLE001 - a killed postmaster leaves a pid file behind
                    pass
        for pid in self._primary_pids:  # backends of the killed postmaster still ending
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)

    def _until(self, dsn: str, query: str, params: tuple, failure: str) -> None:
        deadline = time.monotonic() + STATE_TIMEOUT
        while True:
            try:
                with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
                    if conn.execute(query, params).fetchone()[0]:
                        return
            except psycopg.OperationalError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{failure} within {STATE_TIMEOUT:.0f}s")
            time.sleep(POLL)


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (the postmaster's backends and helpers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def start_replica_pair(*, synchronous: bool) -> ReplicaPair:
    """A primary and a standby streaming from it, both ready; stop() them afterwards."""
    bindir = _system_bindir()
    if bindir is None:
        raise FileNotFoundError("failover tests need the PostgreSQL server binaries (apt-get install postgresql)")
    user = _ensure_user(USER) if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="lgpd-replicas-"))
    if user is not None:
        os.chown(base, user.pw_uid, user.pw_gid)
    run = _runner(bindir, None if user is None else user.pw_name)
    pair = ReplicaPair(base, run, _free_port(), _free_port(), synchronous)
    try:
        run("initdb", "-D", pair.primary_data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")
        with (pair.primary_data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# langgraph-pg-durable failover tests\n"
                f"listen_addresses = '127.0.0.1'\nport = {pair.primary_port}\nunix_socket_directories = '{base}'\n"
                "fsync = off\nmax_connections = 100\nwal_level = replica\nmax_wal_senders = 4\nwal_keep_size = '256MB'\n"
            )
        run("pg_ctl", "-D", pair.primary_data, "-l", base / "primary.log", "-w", "-t", "60", "start")
        wait_until_ready(pair.primary_dsn)
        run(
            "pg_basebackup",
            "-D",
            pair.standby_data,
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
            "-h",
            "127.0.0.1",
            "-p",
            pair.primary_port,
            "-U",
            "postgres",
        )
        # The standby's own port; the primary's line above it in the copied file is overridden.
        with (pair.standby_data / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {pair.standby_port}\n")
        run("pg_ctl", "-D", pair.standby_data, "-l", base / "standby.log", "-w", "-t", "60", "start")
        if synchronous:
            # On the primary alone: a promoted standby carrying it would wait for a standby it has not.
            with psycopg.connect(pair.primary_dsn, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                conn.execute("SELECT pg_reload_conf()")
        pair.wait_streaming()
    except BaseException:
        pair.stop()
        raise
    return pair
