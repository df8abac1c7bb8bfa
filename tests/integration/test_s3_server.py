"""The session's S3 server really stores objects, enforces its credentials, and can be gated."""

from __future__ import annotations

import os
import time

import obstore
import pytest
from obstore.exceptions import GenericError, PermissionDeniedError
from obstore.store import from_url

from s3_server import S3Server, start_s3_server
from tcp_gate import TcpGate

# No retries: an unreachable server must fail the call at once, not after obstore's 180 s.
NO_RETRIES = {"max_retries": 0}


def test_put_get_round_trip(s3_server: S3Server, s3_prefix: str) -> None:
    store = from_url(s3_server.url(s3_prefix), **s3_server.options())
    payload = bytes(range(256)) * 64
    obstore.put(store, "blob", payload)
    assert bytes(obstore.get(store, "blob").bytes()) == payload
    listed = [meta["path"] for batch in obstore.list(store) for meta in batch]
    assert listed == ["blob"]
    obstore.delete(store, "blob")
    with pytest.raises(FileNotFoundError):
        obstore.get(store, "blob")


def test_prefixes_are_isolated(s3_server: S3Server, s3_prefix: str) -> None:
    mine = from_url(s3_server.url(s3_prefix), **s3_server.options())
    other = from_url(s3_server.url(s3_prefix + "-other"), **s3_server.options())
    obstore.put(mine, "k", b"mine")
    with pytest.raises(FileNotFoundError):
        obstore.get(other, "k")


def test_wrong_secret_is_refused(s3_server: S3Server, s3_prefix: str) -> None:
    options = s3_server.options()
    options["config"]["secret_access_key"] = "not-" + s3_server.secret_access_key
    store = from_url(s3_server.url(s3_prefix), **options, retry_config=NO_RETRIES)
    with pytest.raises(PermissionDeniedError):
        obstore.put(store, "k", b"x")


def test_stop_ends_the_process_and_deletes_its_files_once() -> None:
    server = start_s3_server(bucket="lgpd-stop-test")
    base_dir, pid = server.base_dir, server.pid
    assert base_dir is not None and base_dir.exists() and pid is not None
    server.stop()
    server.stop()  # the second stop is a no-op
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not base_dir.exists()
    assert not [p for p in server._stray_files if p.exists()]


def test_gate_down_makes_server_unreachable_then_up_restores_it(s3_server: S3Server, s3_prefix: str) -> None:
    with TcpGate.in_front_of(s3_server.endpoint) as gate:
        options = s3_server.options()
        options["config"]["endpoint"] = gate.endpoint
        store = from_url(s3_server.url(s3_prefix), **options, retry_config=NO_RETRIES)
        # Leaves a pooled keep-alive connection: if down() did not cut it, the next put
        # would go through on it.
        obstore.put(store, "k", b"before")

        port = gate.port
        gate.down()
        started = time.monotonic()
        with pytest.raises(GenericError, match="error sending request"):
            obstore.put(store, "k", b"while down")
        assert time.monotonic() - started < 5.0
        with pytest.raises(GenericError):
            obstore.get(store, "k")

        gate.up()
        assert gate.port == port  # the store still points at the same address
        obstore.put(store, "k", b"after")
        assert bytes(obstore.get(store, "k").bytes()) == b"after"
