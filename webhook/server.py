"""Running the two listeners: HTTPS admission/conversion (9443) and plain-HTTP probes (8080).

One process per container (scale by replicas: each worker would otherwise need its own
certificate reload). The TLS context is the live :class:`~webhook.tls.ReloadingContext`, so
rotation needs no restart.

The admission listener owns the event loop it is started on; the probe listener runs in a
thread with a loop of its own, so rendering ``/metrics`` or answering a flood of probe requests
never delays an admission answer. Readiness is read on the probe thread from values that are
plain attributes (atomic to read): the TLS listener's ``started``, the view's ``synced``, and a
heartbeat the admission loop writes, so a stalled admission loop turns the replica unready
instead of hiding behind a responsive probe thread. Both listeners carry the connection bounds
of :mod:`webhook.bounds`.

SIGTERM drains: the HTTPS listener stops accepting, requests in flight get their answers for up
to ``drain_seconds`` (then they are cancelled), the probe listener and the certificate watcher
stop, and the process exits 0 (see :mod:`webhook.graceful` for why uvicorn alone would not).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from policies.config import PolicyConfig
from policies.families import TABLES
from policies.rules import RuleTable
from policies.view import View, not_synced_reason
from webhook.admission import Admission
from webhook.app import WebhookApp, create_probe_app
from webhook.bounds import BoundedServer, Bounds, bounded_protocol, trim_free_memory
from webhook.conversion import convert_review
from webhook.graceful import GracefulServer
from webhook.metrics import Metrics
from webhook.tls import ReloadingContext

log = logging.getLogger("catalog_warden.server")

TRIM_SECONDS = 10.0
"""How often the probe thread gives freed heap pages back (``webhook.bounds.trim_free_memory``)."""


@dataclass(frozen=True)
class ServeSettings:
    cert_dir: Path
    host: str = "0.0.0.0"
    port: int = 9443
    probe_host: str = "0.0.0.0"
    probe_port: int = 8080
    client_ca: Path | None = None
    cert_poll_seconds: float = 5.0
    drain_seconds: int = 10
    """How long SIGTERM waits for in-flight requests: above every webhook's timeoutSeconds (5 s at
    most in manifests/webhooks), below the pod's terminationGracePeriodSeconds (30 s)."""
    bounds: Bounds = field(default_factory=Bounds)
    stall_timeout: float = 10.0
    """Readiness turns false when the admission loop has not run for this long."""


class _WebhookServer(GracefulServer, BoundedServer):
    """The TLS listener: a clean exit on SIGTERM (``webhook.graceful``) and a handshake deadline."""


class _ProbeServer(BoundedServer):
    """The probe listener leaves signal handling to the main listener, which stops both."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class Warden:
    """The webhook server: both listeners, the certificate watcher, and the shared metrics.

    ``run()`` serves until ``stop()`` is called or a signal arrives. ``tables`` is the rule
    table set (the default is every family; tests may pass their own).
    """

    def __init__(
        self,
        settings: ServeSettings,
        view: Callable[[], View],
        config: PolicyConfig,
        tables: Mapping[str, RuleTable] = TABLES,
    ) -> None:
        self.settings = settings
        self.view = view
        self.metrics = Metrics(families=tables)
        self.tls = ReloadingContext(settings.cert_dir, settings.client_ca, self.metrics)
        admission = Admission(view, config, self.metrics, tables=tables)
        bounds = settings.bounds
        self.main = _WebhookServer(
            uvicorn.Config(
                WebhookApp(admission, self.metrics, convert_review),
                host=settings.host,
                port=settings.port,
                ssl_context_factory=lambda _config, _default: self.tls.context,
                log_config=None,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=settings.drain_seconds,
                http=bounded_protocol(bounds, self.metrics, "webhook"),
                limit_concurrency=bounds.limit_concurrency,
                backlog=bounds.backlog,
            ),
            bounds,
        )
        self.probe = _ProbeServer(
            uvicorn.Config(
                create_probe_app(self.metrics, self.ready),
                host=settings.probe_host,
                port=settings.probe_port,
                log_config=None,
                access_log=False,
                lifespan="off",
                http=bounded_protocol(bounds, self.metrics, "probes"),
                limit_concurrency=bounds.limit_concurrency,
                backlog=bounds.backlog,
            ),
            bounds,
        )
        self._heartbeat = time.monotonic()
        self._probe_error: BaseException | None = None

    def ready(self) -> tuple[bool, str]:
        """Called on the probe thread: reads only attributes the other threads assign whole."""
        if not self.main.started:
            return False, "TLS listener not started"
        stalled = time.monotonic() - self._heartbeat
        if stalled > self.settings.stall_timeout:
            return False, f"admission event loop stalled for {stalled:.1f}s"
        why = not_synced_reason(self.view())
        if why:
            return False, why
        return True, "ok"

    def stop(self) -> None:
        self.main.should_exit = True

    async def _beat(self) -> None:
        interval = min(1.0, self.settings.stall_timeout / 4)
        while True:
            self._heartbeat = time.monotonic()
            await asyncio.sleep(interval)

    async def _probes(self) -> None:
        """The probe listener, and every ``TRIM_SECONDS`` the heap's free pages given back."""

        async def trim() -> None:
            while True:
                await asyncio.sleep(TRIM_SECONDS)
                trim_free_memory()  # the GIL is released for the call: admission keeps running

        trimmer = asyncio.create_task(trim())
        try:
            await self.probe.serve()
        finally:
            trimmer.cancel()

    def _serve_probes(self) -> None:
        """The probe thread: its own loop; if it ends on its own (a port in use), the server stops."""
        try:
            asyncio.run(self._probes())
        except BaseException as exc:  # uvicorn exits with SystemExit when it cannot bind
            self._probe_error = exc
        finally:
            self.main.should_exit = True

    async def run(self) -> None:
        stop = asyncio.Event()
        watcher = asyncio.create_task(self.tls.watch(self.settings.cert_poll_seconds, stop))
        heartbeat = asyncio.create_task(self._beat())
        probes = threading.Thread(target=self._serve_probes, name="catalog-warden-probes", daemon=True)
        probes.start()
        s = self.settings
        log.info("serving", extra={"fields": {"port": s.port, "probe_port": s.probe_port, "cert_dir": str(s.cert_dir)}})
        try:
            await self.main.serve()
        finally:
            stop.set()
            heartbeat.cancel()
            self.probe.should_exit = True
            await asyncio.to_thread(probes.join, 15)
            await asyncio.gather(watcher, heartbeat, return_exceptions=True)
        if self._probe_error is not None:
            raise self._probe_error
