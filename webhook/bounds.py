"""Connection bounds: a deadline for every phase of a connection, and a cap on what it may hold.

uvicorn (0.54) bounds only the keep-alive wait *after* a response, and, with
``limit_concurrency``, the number of open connections plus running requests. Anyone who reaches
the port could otherwise hold a connection, and its buffers, for ever: by never finishing the TLS
handshake, by never sending a request, by dripping the request head one byte at a time, or by
never finishing the body. Each of those is a deadline here:

=====================  ==========================================================================
phase                  bound
=====================  ==========================================================================
TLS handshake          ``tls_handshake_timeout`` (asyncio's own timer; also bounds the close_notify
                       wait when the server closes a TLS connection)
before a request       ``idle_timeout``: from the handshake, and from each response, to the first
                       byte of the next request (uvicorn's keep-alive timer, armed from the start)
request line, headers  ``header_timeout`` from the first byte; at most ``max_header_bytes``
body                   ``body_timeout`` from the end of the headers to the last body byte
=====================  ==========================================================================

The header and body deadlines are totals, not inactivity timers, so dripping bytes does not
extend them. A new connection that finds ``limit_concurrency`` connections open first closes the
ones that have waited longest with no request in the app (``evicted``); a request arriving while
that many connections or requests are still open is answered 503 by uvicorn and its connection
closed. A cut request is answered with a Kubernetes
``Status`` (408, 431) when no answer has started yet, then the connection is closed; every cut is
counted in ``catalog_warden_connections_closed_total{listener,reason}``.

The apiserver writes each request in one go and waits at most the webhook's ``timeoutSeconds``
(10 s by default, 30 s at most; our manifests use 3 and 5) for the whole call, so a legitimate
client finishes each phase in milliseconds and a client still busy after these defaults is one
the apiserver has already given up on.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import uvicorn
from prometheus_client import Counter
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from webhook.app import status_body
from webhook.metrics import CONNECTION_CLOSE_REASONS, Metrics


@dataclass(frozen=True)
class Bounds:
    """The limits of one listener; every duration is in seconds (docs/configuration.md)."""

    limit_concurrency: int = 512
    """Open connections plus running requests beyond which a request is answered 503."""
    backlog: int = 2048
    """Connections the kernel queues before ``accept`` (uvicorn's default)."""
    tls_handshake_timeout: float = 5.0
    idle_timeout: float = 5.0
    header_timeout: float = 5.0
    body_timeout: float = 10.0
    max_header_bytes: int = 64 * 1024
    """Request line plus headers; the apiserver sends a few hundred bytes."""
    drain_idle: float = 2.0
    """On shutdown, how long a connection with no request is kept for one more (answered with
    ``Connection: close``) before it is closed (:meth:`BoundedProtocol.shutdown`)."""


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the missing deadlines (module docstring).

    Use :func:`bounded_protocol` to get a subclass bound to one listener's :class:`Bounds` and
    metrics: uvicorn constructs the protocol itself, with its own arguments only.
    """

    bounds: ClassVar[Bounds]
    waiting: ClassVar[dict[BoundedProtocol, None]]
    """This listener's connections with no request in the app (idle, or reading a head), oldest first."""
    closes: ClassVar[Mapping[str, Counter]]
    """``catalog_warden_connections_closed_total`` by reason."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = self.bounds.idle_timeout  # type: ignore[assignment]  # uvicorn types it int
        self._reading_head = True
        self._head_bytes = 0
        self._deadline: asyncio.TimerHandle | None = None
        self._draining = False

    # -- connection -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._make_room()
        self.waiting[self] = None
        # uvicorn arms its keep-alive timer only after a response; arm it before the first request too.
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.pop(self, None)
        self._disarm()
        self._unset_keepalive_if_required()  # uvicorn leaves it armed when the connection broke
        super().connection_lost(exc)

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            self.closes["idle_timeout"].inc()
        super().timeout_keep_alive_handler()

    # -- request head and body --------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._reading_head:
            self._head_bytes += len(data)
        super().data_received(data)  # runs on_headers_complete / on_message_complete as it parses
        if self.transport.is_closing():
            return
        if not self._reading_head:
            if self._deadline is None:
                self._arm(self.bounds.body_timeout, "body_timeout", 408, "request body not complete within")
        elif self._head_bytes > self.bounds.max_header_bytes:
            limit = self.bounds.max_header_bytes
            self._cut("header_too_large", 431, f"request line and headers exceed the limit of {limit} bytes")
        elif self._head_bytes and self._deadline is None:
            self._arm(self.bounds.header_timeout, "header_timeout", 408, "request line and headers not received within")

    def on_headers_complete(self) -> None:
        self.waiting.pop(self, None)
        self._reading_head = False
        self._head_bytes = 0
        self._disarm()
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self.closes["over_concurrency"].inc()  # uvicorn answers 503 and closes (the condition is its own)
        super().on_headers_complete()
        if self._draining and self.cycle is not None:
            self.cycle.keep_alive = False  # the answer says Connection: close; the client dials again

    def on_message_complete(self) -> None:
        self._reading_head = True
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request
        if self.cycle.response_complete and not self.transport.is_closing():
            self.waiting[self] = None  # to the end: the most recently busy connection

    def _make_room(self) -> None:
        """Close the connections waiting longest for a request until the limit leaves room again.

        uvicorn counts open connections against ``limit_concurrency``, idle ones included, so
        a client holding that many idle connections would turn every request into a 503. A
        connection with no request in the app is the cheapest to give up (as nginx reuses idle
        keep-alive connections when it runs out): only requests in progress hold the limit.
        """
        limit = self.limit_concurrency
        while limit is not None and len(self.connections) >= limit and self.waiting:
            oldest = next(iter(self.waiting))
            del self.waiting[oldest]
            self.connections.discard(oldest)  # now: its connection_lost comes on a later loop turn
            oldest.closes["evicted"].inc()
            oldest._disarm()
            oldest.transport.close()

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Drain without racing the client: a connection between requests is not cut at once.

        uvicorn closes such a connection the moment shutdown starts. kube-apiserver keeps its
        connections to a webhook alive and writes the next call on one without warning, and it
        never retries a call on another endpoint; a close at that instant loses the call (EOF,
        and ``failurePolicy`` decides it). So from now on every answer says ``Connection: close``
        (the client closes and dials again, reaching a replica still in the Service), and a
        connection with no request is closed once it has waited ``drain_idle`` more for one:
        the ordinary keep-alive race, not one at the instant the whole fleet of calls is busy.
        """
        self._draining = True
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            return
        if self._head_bytes:  # a head is arriving: answer it (closing after), within its own deadline
            return
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.bounds.drain_idle, self.timeout_keep_alive_handler)

    # -- cutting ----------------------------------------------------------------------------

    def _arm(self, seconds: float, reason: str, status: int, what: str) -> None:
        message = f"{what} {seconds:g}s"
        self._deadline = self.loop.call_later(seconds, self._cut, reason, status, message)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _cut(self, reason: str, status: int, message: str) -> None:
        """Answer ``status`` if no answer has started on this connection, then close it."""
        self._deadline = None
        if self.transport.is_closing():
            return
        self.closes[reason].inc()
        cycle = self.cycle
        # Reading a head: this request has no cycle yet, so the previous answer must be complete.
        answering = cycle is not None and (
            not cycle.response_complete if self._reading_head else cycle.response_started
        )
        if not answering:
            body = status_body(status, message)
            head = [STATUS_LINE[status], *(b"%s: %s\r\n" % pair for pair in self.server_state.default_headers)]
            head.append(b"content-type: application/json\r\nconnection: close\r\n")
            self.transport.write(b"".join(head) + b"content-length: %d\r\n\r\n" % len(body) + body)
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive() returns http.disconnect, its send() is dropped
            cycle.message_event.set()
        self.transport.close()


def bounded_protocol(bounds: Bounds, metrics: Metrics, listener: str) -> type[BoundedProtocol]:
    """A :class:`BoundedProtocol` class for one listener (uvicorn's ``Config(http=...)``)."""
    counter = metrics.connections_closed
    closes = {reason: counter.labels(listener, reason) for reason in CONNECTION_CLOSE_REASONS}
    return type("BoundedProtocol", (BoundedProtocol,), {"bounds": bounds, "closes": closes, "waiting": {}})


class BoundedServer(uvicorn.Server):
    """A uvicorn server whose TLS listener has a handshake (and shutdown) deadline.

    uvicorn calls ``loop.create_server`` without ``ssl_handshake_timeout``, so asyncio's default
    of 60 s applies to a client that connects and never says hello. The loop's method is
    shadowed for the duration of ``startup`` only, on this server's own loop.
    """

    def __init__(self, config: uvicorn.Config, bounds: Bounds) -> None:
        super().__init__(config)
        self.bounds = bounds

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self.config.ssl is None:  # loaded by uvicorn before startup
            await super().startup(sockets)
            return
        loop = asyncio.get_running_loop()
        seconds = self.bounds.tls_handshake_timeout
        loop.create_server = functools.partial(  # type: ignore[method-assign]
            loop.create_server, ssl_handshake_timeout=seconds, ssl_shutdown_timeout=seconds
        )
        try:
            await super().startup(sockets)
        finally:
            del loop.create_server


def trim_free_memory() -> bool:
    """Give the heap's free pages back to the system (glibc ``malloc_trim``); False without glibc.

    Each TLS connection holds buffers of a few hundred KiB while it lives. After a wave of
    connections closes, glibc keeps the freed heap pages resident: 8 waves of 2,000 half-open
    connections left RSS at 328 MiB. ctypes releases the GIL for the call, so the probe thread
    runs it (``webhook.server``) without pausing admission. Pinning glibc's mmap threshold
    instead kept RSS lower too, but cost a fifth of the throughput at one request in flight.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return False
    return bool(trim(0))
