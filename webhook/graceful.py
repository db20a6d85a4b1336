"""A uvicorn server that stops on SIGTERM or SIGINT and lets its caller finish the shutdown.

Why: ``uvicorn.Server.serve()`` catches the signal, shuts down (stops accepting, lets in-flight
requests finish up to ``timeout_graceful_shutdown``), restores the previous handlers and then
*raises the signal again*. With the default handler that kills the process right there, inside
``serve()``: whatever the caller meant to do after it (release the Lease, stop the informer
cache, close the registry clients) never runs, and the exit status is 143. Kubernetes sends
SIGTERM exactly once and waits ``terminationGracePeriodSeconds`` for a clean exit, so the clean
exit must happen: this server returns from ``serve()`` normally and the process exits 0 once its
caller is done. A second signal after ``serve()`` returned gets the default handler (it kills).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Generator

import uvicorn
from uvicorn.server import HANDLED_SIGNALS


class GracefulServer(uvicorn.Server):
    """``uvicorn.Server`` without the re-raise: a signal ends ``serve()``, the caller's cleanup runs."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only: a server run in a thread is stopped by should_exit
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)
