"""Running the two listeners: HTTPS admission/conversion (9443) and plain-HTTP probes (8080).

Both run as uvicorn servers in one event loop, one process per container (scale by replicas:
each worker would otherwise need its own certificate reload). The TLS context is the live
:class:`~webhook.tls.ReloadingContext`, so rotation needs no restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from policies.config import PolicyConfig
from policies.view import View
from webhook.admission import Admission
from webhook.app import create_app, create_probe_app
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


class _ProbeServer(uvicorn.Server):
    """The probe listener leaves signal handling to the main listener, which stops both."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _convert_fn() -> Callable | None:
    try:
        from webhook.conversion import convert_review
    except ImportError:  # conversion not built into this server
        return None
    return convert_review


async def serve(settings: ServeSettings, view: Callable[[], View], config: PolicyConfig) -> None:
    metrics = Metrics()
    tls = ReloadingContext(settings.cert_dir, settings.client_ca, metrics)
    admission = Admission(view, config, metrics)
    app = create_app(admission, metrics, _convert_fn())
    main_config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        ssl_context_factory=lambda _config, _default: tls.context,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=10,
    )
    main = uvicorn.Server(main_config)

    def ready() -> tuple[bool, str]:
        if not main.started:
            return False, "TLS listener not started"
        if not view().synced:
            return False, "cluster state not synced"
        return True, "ok"

    probe = _ProbeServer(
        uvicorn.Config(
            create_probe_app(metrics, ready),
            host=settings.probe_host,
            port=settings.probe_port,
            log_config=None,
            access_log=False,
            lifespan="off",
        )
    )
    stop = asyncio.Event()
    watcher = asyncio.create_task(tls.watch(settings.cert_poll_seconds, stop))
    probe_task = asyncio.create_task(probe.serve())
    log.info(
        "serving",
        extra={
            "fields": {"port": settings.port, "probe_port": settings.probe_port, "cert_dir": str(settings.cert_dir)}
        },
    )
    try:
        await main.serve()
    finally:
        stop.set()
        probe.should_exit = True
        await asyncio.gather(watcher, probe_task, return_exceptions=True)
