"""Running the two listeners: HTTPS admission/conversion (9443) and plain-HTTP probes (8080).

Both run as uvicorn servers in one event loop, one process per container (scale by replicas:
each worker would otherwise need its own certificate reload). The TLS context is the live
:class:`~webhook.tls.ReloadingContext`, so rotation needs no restart.

SIGTERM drains: the HTTPS listener stops accepting, requests in flight get their answers for up
to ``drain_seconds`` (then they are cancelled), the probe listener and the certificate watcher
stop, and the process exits 0 (see :mod:`webhook.graceful` for why uvicorn alone would not).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from policies.config import PolicyConfig
from policies.families import TABLES
from policies.rules import RuleTable
from policies.view import View, not_synced_reason
from webhook.admission import Admission
from webhook.app import WebhookApp, create_probe_app
from webhook.conversion import convert_review
from webhook.graceful import GracefulServer
from webhook.metrics import Metrics
from webhook.tls import ReloadingContext

log = logging.getLogger("catalog_warden.server")


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


class _ProbeServer(uvicorn.Server):
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
        self.metrics = Metrics()
        self.tls = ReloadingContext(settings.cert_dir, settings.client_ca, self.metrics)
        admission = Admission(view, config, self.metrics, tables=tables)
        self.main = GracefulServer(
            uvicorn.Config(
                WebhookApp(admission, self.metrics, convert_review),
                host=settings.host,
                port=settings.port,
                ssl_context_factory=lambda _config, _default: self.tls.context,
                log_config=None,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=settings.drain_seconds,
            )
        )
        self.probe = _ProbeServer(
            uvicorn.Config(
                create_probe_app(self.metrics, self.ready),
                host=settings.probe_host,
                port=settings.probe_port,
                log_config=None,
                access_log=False,
                lifespan="off",
            )
        )

    def ready(self) -> tuple[bool, str]:
        if not self.main.started:
            return False, "TLS listener not started"
        why = not_synced_reason(self.view())
        if why:
            return False, why
        return True, "ok"

    def stop(self) -> None:
        self.main.should_exit = True

    async def run(self) -> None:
        stop = asyncio.Event()
        watcher = asyncio.create_task(self.tls.watch(self.settings.cert_poll_seconds, stop))
        probe_task = asyncio.create_task(self.probe.serve())
        s = self.settings
        log.info("serving", extra={"fields": {"port": s.port, "probe_port": s.probe_port, "cert_dir": str(s.cert_dir)}})
        try:
            await self.main.serve()
        finally:
            stop.set()
            self.probe.should_exit = True
            await asyncio.gather(watcher, probe_task, return_exceptions=True)
