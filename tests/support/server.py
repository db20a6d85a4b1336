"""Start the real webhook server for tests: as a subprocess (the CLI) or in a thread (custom tables).

Both serve real HTTPS with a certificate chain made by ``webhook.certs`` on 127.0.0.1.
Readiness is polled on ``/readyz`` with a deadline; nothing sleeps hoping for timing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from policies.config import PolicyConfig
from policies.rules import RuleTable
from policies.view import MemoryView, View
from webhook.certs import write_dev_certs
from webhook.server import ServeSettings, Warden

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``check`` until it is true, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def make_certs(directory: Path, dns: Sequence[str] = ("catalog-warden.catalog-warden.svc",)) -> Path:
    write_dev_certs(directory, list(dns))
    return directory


@dataclass
class Endpoint:
    """Where a started server listens."""

    port: int
    probe_port: int
    ca: Path
    cert_dir: Path
    extra: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def probe_url(self) -> str:
        return f"http://127.0.0.1:{self.probe_port}"

    def client(self, **kw: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=self.ssl_context(), timeout=10, **kw)  # type: ignore[arg-type]

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.probe_url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def metric(self, name: str) -> float:
        """The sum of every sample of ``name`` on /metrics (0 when absent)."""
        text = httpx.get(f"{self.probe_url}/metrics", timeout=5).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and (name.endswith('"') or line[len(name)] in " {"):
                total += float(line.rsplit(" ", 1)[1])
        return total


class ServerProcess:
    """``catalog-warden serve`` in a subprocess (exactly what the README runs)."""

    def __init__(self, cert_dir: Path, args: Sequence[str] = (), ca: Path | None = None) -> None:
        self.endpoint = Endpoint(free_port(), free_port(), ca or cert_dir / "ca.crt", cert_dir)
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = cert_dir.parent / f"server-{self.endpoint.port}.log"
        self.endpoint.extra["log"] = self.log

    def __enter__(self) -> Endpoint:
        cmd = [
            sys.executable, "-m", "webhook.cli", "serve",
            "--cert-dir", str(self.endpoint.cert_dir),
            "--host", "127.0.0.1", "--port", str(self.endpoint.port),
            "--probe-host", "127.0.0.1", "--probe-port", str(self.endpoint.probe_port),
            *self.args,
        ]  # fmt: skip
        self._log = self.log.open("wb")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            wait_until(lambda: self.endpoint.ready() or self.proc.poll() is not None, what="server readiness")
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}: {self.log.read_text()}")
        except BaseException:
            self.__exit__()
            raise
        return self.endpoint

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()

    def logs(self) -> str:
        return self.log.read_text()


class ServerThread:
    """The server in a thread of this process, for custom rule tables or views."""

    def __init__(
        self,
        cert_dir: Path,
        view: View | None = None,
        config: PolicyConfig | None = None,
        tables: Mapping[str, RuleTable] | None = None,
        cert_poll_seconds: float = 5.0,
        stall_timeout: float = 10.0,
    ) -> None:
        self.endpoint = Endpoint(free_port(), free_port(), cert_dir / "ca.crt", cert_dir)
        settings = ServeSettings(
            cert_dir=cert_dir, host="127.0.0.1", port=self.endpoint.port, probe_host="127.0.0.1",
            probe_port=self.endpoint.probe_port, cert_poll_seconds=cert_poll_seconds, stall_timeout=stall_timeout,
        )  # fmt: skip
        the_view = view if view is not None else MemoryView()
        kw = {"tables": tables} if tables is not None else {}
        self.warden = Warden(settings, lambda: the_view, config or PolicyConfig(), **kw)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.warden.run()), daemon=True)

    def __enter__(self) -> Endpoint:
        self.thread.start()
        wait_until(self.endpoint.ready, what="in-process server readiness")
        return self.endpoint

    def __exit__(self, *exc: object) -> None:
        self.warden.stop()
        self.thread.join(timeout=15)
