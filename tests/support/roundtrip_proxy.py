"""A TCP proxy on 127.0.0.1 that counts network round trips between a client and Postgres.

A round trip is one client flight: bytes from the client after the server last spoke
(or at the start). The client waiting for an answer before sending again is exactly
what costs latency, so this is what the savers promise to keep at one per call.
"""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class RoundTripProxy:
    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.listener = socket.create_server(("127.0.0.1", 0))
        port = self.listener.getsockname()[1]
        netloc = parts.netloc.rsplit("@", 1)
        auth = netloc[0] + "@" if len(netloc) == 2 else ""
        self.dsn = urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{port}"))
        self._lock = threading.Lock()
        self.round_trips = 0
        self.server_bytes = 0
        self._server_spoke = True
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> int:
        """The round trips counted since the last reset."""
        with self._lock:
            count, self.round_trips, self.server_bytes = self.round_trips, 0, 0
            return count

    def take_bytes(self) -> int:
        """The bytes the server sent since the last reset or take."""
        with self._lock:
            count, self.server_bytes = self.server_bytes, 0
            return count

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        try:
            while data := src.recv(1 << 16):
                with self._lock:
                    if from_client and self._server_spoke:
                        self.round_trips += 1
                    self._server_spoke = not from_client
                    if not from_client:
                        self.server_bytes += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Refuse new connections and cut the open ones, as a vanished server would."""
        self._closed = True
        self.listener.close()
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
