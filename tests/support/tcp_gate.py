"""A TCP proxy on 127.0.0.1 that tests can close and reopen, to make a server unreachable.

While the gate is down its port refuses connections and every connection that was open
(including a client's pooled keep-alive ones) has been reset, as a vanished host would.
``up()`` listens again on the same port, so clients need no new address.
"""

from __future__ import annotations

import socket
import struct
import threading
from urllib.parse import urlsplit

# SO_LINGER on, timeout 0: close() sends RST instead of FIN, so a peer's next read or
# write fails at once rather than looking like an orderly end of a response.
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)


class TcpGate:
    """Forwards 127.0.0.1:``port`` to ``target`` while up; refuses and resets while down."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._closed = False
        self.port = 0
        self.up()

    @classmethod
    def in_front_of(cls, endpoint: str) -> TcpGate:
        """A gate for an ``http://host:port`` endpoint (e.g. ``S3Server.endpoint``)."""
        parts = urlsplit(endpoint)
        default = 443 if parts.scheme == "https" else 80
        return cls((parts.hostname or "127.0.0.1", parts.port or default))

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:port``: where an HTTP client should connect instead of the target."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_up(self) -> bool:
        """True while the gate forwards connections."""
        return self._listener is not None

    def up(self) -> None:
        """Accept and forward connections again, on the same port as before; idempotent."""
        with self._lock:
            if self._closed:
                raise RuntimeError("TcpGate is closed")
            if self._listener is not None:
                return
            # create_server sets SO_REUSEADDR, so the old port can be bound again at once.
            listener = socket.create_server(("127.0.0.1", self.port))
            self.port = listener.getsockname()[1]
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and reset every open one; idempotent."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            _abort(listener)  # shutdown() first: it wakes the thread blocked in accept()
        for sock in sockets:
            _abort(sock)

    def close(self) -> None:
        """Take the gate down for good."""
        with self._lock:
            self._closed = True
        self.down()

    def __enter__(self) -> TcpGate:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was shut by down()
            threading.Thread(target=self._connect, args=(client, listener), daemon=True).start()

    def _connect(self, client: socket.socket, listener: socket.socket) -> None:
        """Open the upstream side for ``client``, unless the gate went down meanwhile."""
        try:
            server = socket.create_connection(self.target, timeout=10)
            server.settimeout(None)
        except OSError:
            _abort(client)
            return
        with self._lock:
            # A connection accepted just before down() must not survive it.
            admitted = self._listener is listener
            if admitted:
                self._sockets.update((client, server))
        if not admitted:
            _abort(client)
            _abort(server)
            return
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
        threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass
        # Either side ending ends the pair (HTTP clients never half-close).
        with self._lock:
            owned = src in self._sockets  # else down() has reset both already
            self._sockets.difference_update((src, dst))
        if owned:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


def _abort(sock: socket.socket) -> None:
    """Shut ``sock`` (waking any thread blocked on it) and close it with a reset."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
