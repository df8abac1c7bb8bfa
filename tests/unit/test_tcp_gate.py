"""The TCP gate that cuts tests off a server, in front of a local echo server: down cuts, up restores."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tcp_gate import TcpGate


def test_gate_down_cuts_open_connections_and_refuses_new_ones() -> None:
    with _echo_server() as target, TcpGate(target) as gate:
        with socket.create_connection(("127.0.0.1", gate.port), timeout=5) as conn:
            conn.sendall(b"ping")
            assert _recv_exactly(conn, 4) == b"ping"
            gate.down()
            # Cut, not left open: the read ends at once (EOF or reset) instead of timing out.
            try:
                assert conn.recv(1) == b""
            except ConnectionResetError:
                pass
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", gate.port), timeout=5)

        gate.up()
        with socket.create_connection(("127.0.0.1", gate.port), timeout=5) as conn:
            conn.sendall(b"pong")
            assert _recv_exactly(conn, 4) == b"pong"


@contextmanager
def _echo_server() -> Iterator[tuple[str, int]]:
    """A threaded TCP echo server on 127.0.0.1; yields its address."""
    listener = socket.create_server(("127.0.0.1", 0))

    def echo(conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(1 << 16):
                    conn.sendall(data)
            except OSError:
                pass

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[:2]
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size and (chunk := conn.recv(size - len(data))):
        data += chunk
    return data
