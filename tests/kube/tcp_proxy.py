"""A TCP forwarder the tests can cut, in the ways real networks fail.

- :meth:`TcpProxy.cut`: a partition. Every forwarded connection is closed (a FIN, or with
  ``reset=True`` an RST), and from then on new connections are accepted but never answered, so a
  client behind it sees its requests hang.
- :meth:`TcpProxy.blackhole`: a half-open path (a NAT entry or a load balancer that forgot the
  flow). Every forwarded connection stays open but no byte crosses it any more, in either
  direction, and new connections hang as under a cut: only a read timeout tells the client.
- :meth:`TcpProxy.heal`: new connections are forwarded again. Connections cut or blackholed
  before stay as they are (dead): the client must notice on its own.

Each call takes effect before it returns (the tests wait on the proxy's state, never on time).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field
from types import TracebackType


@dataclass
class _Link:
    """One forwarded connection: both ends, and whether bytes still cross it."""

    client: socket.socket
    upstream: socket.socket
    silent: threading.Event = field(default_factory=threading.Event)


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.is_cut = threading.Event()
        self._links: list[_Link] = []
        self._hanging: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closed = True
        self.listener.close()
        self._drop_all()
        with self._lock:
            hanging, self._hanging = self._hanging, []
        for s in hanging:
            s.close()

    def cut(self, reset: bool = False) -> None:
        """Partition: close every forwarded connection (``reset``: with an RST); accept and stay silent."""
        self.is_cut.set()
        self._drop_all(reset)

    def blackhole(self) -> None:
        """Half-open: every forwarded connection stays open and carries nothing; new ones hang."""
        self.is_cut.set()
        with self._lock:
            for link in self._links:
                link.silent.set()

    def heal(self) -> None:
        """Forward new connections again (the ones cut or blackholed stay dead)."""
        self.is_cut.clear()

    def open_links(self) -> int:
        """Forwarded connections still carrying bytes."""
        with self._lock:
            return sum(1 for link in self._links if not link.silent.is_set())

    def _drop_all(self, reset: bool = False) -> None:
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.silent.set()
            for s in (link.client, link.upstream):
                with contextlib.suppress(OSError):
                    if reset:  # no FIN; the RST goes out when the pump blocked in recv lets go of the socket
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.shutdown(socket.SHUT_RD if reset else socket.SHUT_RDWR)  # wakes the pump's recv
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.is_cut.is_set():
                with self._lock:
                    self._hanging.append(client)  # silent: never read, never answered (until exit)
                continue
            upstream = socket.create_connection(self.upstream)
            link = _Link(client, upstream)
            with self._lock:
                self._links.append(link)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(link, src, dst), daemon=True).start()

    @staticmethod
    def _pump(link: _Link, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                if not link.silent.is_set():
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            if not link.silent.is_set():  # a blackholed link never says it ended
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)
