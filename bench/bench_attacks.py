"""Bounded attacks on the webhook port (issue 11): memory and connections stay within their bounds.

Each attack runs against a fresh ``catalog-warden serve --state examples/state`` on 127.0.0.1 and
reports the server's RSS (``/proc/PID/status``: VmRSS now, VmHWM the peak) against the
Deployment's 512Mi limit:

- ``paths``: N requests to N distinct unknown paths and families (pipelined on a few keep-alive
  connections), while a probe thread sends an admission request every 50 ms and scrapes ``/metrics`` every
  0.5 s: RSS before and after, the ``/metrics`` size, the slowest admission answer and scrape.
- ``idle``: N TLS connections opened and left idle: how many the server closed, and when
  (seconds from each connection's handshake to its EOF), and what admission answered meanwhile.
- ``half-open``: waves of N TCP connections that never send a ClientHello, each wave left until
  the server closed all of it: RSS after each wave.

Further attacks register in :data:`ATTACKS` (the 3 MiB mutate bound is measured by
``bench/bench_admission.py`` and its owner's benchmark, not here).

    python bench/bench_attacks.py [--attacks paths,idle,half-open] [--paths 100000] [--idle 2000]
                                  [--waves 8] [--server-root DIR] [--server-arg=--idle-timeout=5 ...]

``--server-root`` runs another checkout's server (e.g. ``git worktree add /tmp/old HEAD~3``) to
compare; ``--server-arg`` passes flags through to ``serve``. Loops are bounded; 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.server import free_port, wait_until  # noqa: E402
from webhook.certs import write_dev_certs  # noqa: E402

LIMIT_MIB = 512
REVIEW = json.dumps({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {"uid": "bench", "operation": "CREATE", "name": "web", "namespace": "team-a",
                "kind": {"group": "solar.opendefense.cloud", "version": "v1alpha1", "kind": "Release"},
                "resource": {"group": "solar.opendefense.cloud", "version": "v1alpha1", "resource": "releases"},
                "userInfo": {"username": "bench"},
                "object": {"apiVersion": "solar.opendefense.cloud/v1alpha1", "kind": "Release",
                           "metadata": {"name": "web", "namespace": "team-a"},
                           "spec": {"componentVersionRef": {"name": "ocm-demo-v1.2.0"}}}},
}).encode()  # fmt: skip

MARK = b"HTTP/1.1 404 "


def unknown_request(i: int) -> bytes:
    """Half unknown families, half unknown paths: every one a path the server has never seen."""
    path = f"/validate/family-{i}" if i % 2 else f"/path-{i}/x"
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            "Content-Length: 2\r\n\r\n{}").encode()  # fmt: skip


def flood(server: Server, first: int, count: int, batch: int = 200) -> int:
    """``count`` pipelined requests on one keep-alive TLS connection; the number answered 404."""
    answered = 0
    with server.tls() as sock:
        for start in range(first, first + count, batch):
            n = min(batch, first + count - start)
            sock.sendall(b"".join(unknown_request(i) for i in range(start, start + n)))
            seen, tail = 0, b""
            while seen < n:
                chunk = sock.recv(1 << 18)
                if not chunk:
                    return answered + seen
                data = tail + chunk
                seen += data.count(MARK)
                tail = data[-(len(MARK) - 1) :]
            answered += seen
    return answered


@dataclass
class Server:
    """One ``catalog-warden serve`` process, and its memory as the kernel reports it."""

    root: Path
    certs: Path
    extra: list[str]
    port: int = field(default_factory=free_port)
    probe_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        cmd = [sys.executable, "-m", "webhook.cli", "serve", "--cert-dir", str(self.certs), "--state",
               str(self.root / "examples" / "state"), "--host", "127.0.0.1", "--port", str(self.port),
               "--probe-host", "127.0.0.1", "--probe-port", str(self.probe_port), "--log-level", "warning",
               *self.extra]  # fmt: skip
        self.proc = subprocess.Popen(cmd, cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.ready, timeout=60, what="server readiness")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def ready(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.probe_port}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def memory(self) -> tuple[float, float]:
        """(RSS, peak RSS) in MiB."""
        assert self.proc is not None
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines())
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def tls(self, timeout: float = 30) -> ssl.SSLSocket:
        ctx = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return ctx.wrap_socket(raw, server_hostname="localhost")


class Watcher:
    """Admission every 50 ms and a /metrics scrape every 0.5 s, in threads, while an attack runs."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.stop = threading.Event()
        self.admission: list[tuple[float, int]] = []
        self.scrapes: list[tuple[float, int]] = []
        self.threads = [threading.Thread(target=self._admit), threading.Thread(target=self._scrape)]

    def __enter__(self) -> Watcher:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _admit(self) -> None:
        ctx = ssl.create_default_context(cafile=str(self.server.certs / "ca.crt"))
        ctx.check_hostname = False  # the dev certificate names localhost; we connect to 127.0.0.1
        with httpx.Client(base_url=f"https://127.0.0.1:{self.server.port}", verify=ctx, timeout=30) as c:
            while not self.stop.wait(0.05):
                started = time.perf_counter()
                try:
                    status = c.post("/validate/catalog", content=REVIEW,
                                    headers={"Content-Type": "application/json"}).status_code  # fmt: skip
                except httpx.HTTPError:
                    status = 0
                self.admission.append((time.perf_counter() - started, status))

    def _scrape(self) -> None:
        url = f"http://127.0.0.1:{self.server.probe_port}/metrics"
        while not self.stop.wait(0.5):
            started = time.perf_counter()
            try:
                size = len(httpx.get(url, timeout=60).content)
            except httpx.HTTPError:
                size = -1
            self.scrapes.append((time.perf_counter() - started, size))

    def summary(self) -> str:
        codes = Counter(status for _, status in self.admission)
        slowest = max((s for s, _ in self.admission), default=0.0)
        scrape = max((s for s, _ in self.scrapes), default=0.0)
        return (f"admission during the attack: {dict(sorted(codes.items()))} (0: transport error), slowest "
                f"{slowest * 1000:.0f} ms; slowest /metrics scrape {scrape * 1000:.0f} ms")  # fmt: skip


def metrics_size(server: Server) -> int:
    return len(httpx.get(f"http://127.0.0.1:{server.probe_port}/metrics", timeout=60).content)


def attack_paths(server: Server, args: argparse.Namespace, tmp: Path) -> None:
    rss0, _ = server.memory()
    size0 = metrics_size(server)
    per = args.paths // args.flooders
    answered: list[int] = []
    started = time.perf_counter()
    with Watcher(server) as watch:
        threads = [threading.Thread(target=lambda k=k: answered.append(flood(server, k * per, per)))
                   for k in range(args.flooders)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    seconds = time.perf_counter() - started
    rss1, peak = server.memory()
    print(f"paths: {sum(answered):,} of {per * args.flooders:,} requests to distinct unknown paths and families "
          f"answered 404 in {seconds:.1f} s ({args.flooders} pipelining connections)")  # fmt: skip
    print(f"  RSS {rss0:.0f} -> {rss1:.0f} MiB (peak {peak:.0f} MiB; limit {LIMIT_MIB} MiB)")
    print(f"  /metrics {size0:,} -> {metrics_size(server):,} bytes")
    print(f"  {watch.summary()}")


def attack_idle(server: Server, args: argparse.Namespace, tmp: Path) -> None:
    rss0, _ = server.memory()
    sel = selectors.DefaultSelector()
    opened: dict[int, float] = {}
    closed_after: list[float] = []
    failed = 0
    started = time.perf_counter()
    with Watcher(server) as watch:
        for _ in range(args.idle):
            try:
                sock = server.tls()
            except OSError:
                failed += 1
                continue
            sock.setblocking(False)
            opened[sock.fileno()] = time.perf_counter()
            sel.register(sock, selectors.EVENT_READ)
        open_seconds = time.perf_counter() - started
        _, peak = server.memory()
        deadline = time.perf_counter() + args.idle_deadline
        while sel.get_map() and time.perf_counter() < deadline:
            for key, _ in sel.select(timeout=0.5):
                sock = key.fileobj
                assert isinstance(sock, ssl.SSLSocket)
                try:
                    if sock.recv(4096):
                        continue
                except ssl.SSLWantReadError:
                    continue
                except OSError:
                    pass
                closed_after.append(time.perf_counter() - opened[sock.fileno()])
                sel.unregister(sock)
                sock.close()
        left = len(sel.get_map())
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
    rss1, _ = server.memory()
    q = statistics.quantiles(closed_after, n=100) if len(closed_after) > 1 else [0.0] * 99
    print(f"idle: {len(opened)} TLS connections opened in {open_seconds:.1f} s ({failed} refused)")
    print(f"  closed by the server: {len(closed_after)}, still open after {args.idle_deadline:.0f} s: {left}")
    if closed_after:
        print(f"  seconds from handshake to EOF: min {min(closed_after):.2f}, median {q[49]:.2f}, "
              f"p99 {q[98]:.2f}, max {max(closed_after):.2f}")  # fmt: skip
    print(f"  RSS {rss0:.0f} MiB, {peak:.0f} MiB once all were opened (peak), {rss1:.0f} MiB after; "
          f"limit {LIMIT_MIB} MiB")  # fmt: skip
    print(f"  {watch.summary()}")


def attack_half_open(server: Server, args: argparse.Namespace, tmp: Path) -> None:
    rss0, _ = server.memory()
    print(f"half-open: {args.waves} waves of {args.idle} TCP connections without a ClientHello; RSS {rss0:.0f} MiB")
    for wave in range(1, args.waves + 1):
        socks = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(args.idle)]
        _, peak = server.memory()
        started = time.perf_counter()
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        while sel.get_map() and time.perf_counter() - started < args.idle_deadline:
            for key, _ in sel.select(timeout=0.5):
                sel.unregister(key.fileobj)
        left = len(sel.get_map())
        for s in socks:
            s.close()
        rss, _ = server.memory()
        print(f"  wave {wave}: all closed by the server in {time.perf_counter() - started:.1f} s "
              f"({left} left open), RSS {rss:.0f} MiB (high-water mark so far {peak:.0f})")  # fmt: skip


ATTACKS: dict[str, Callable[[Server, argparse.Namespace, Path], None]] = {
    "paths": attack_paths,
    "idle": attack_idle,
    "half-open": attack_half_open,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attacks", default=",".join(ATTACKS), help=f"comma-separated, of {', '.join(ATTACKS)}")
    ap.add_argument("--paths", type=int, default=100_000, help="distinct unknown paths to request")
    ap.add_argument("--flooders", type=int, default=4, help="connections sending the distinct paths")
    ap.add_argument("--idle", type=int, default=2_000, help="idle (and half-open) connections per run")
    ap.add_argument("--waves", type=int, default=8, help="half-open waves")
    ap.add_argument("--idle-deadline", type=float, default=90.0, help="seconds to wait for the server to close")
    ap.add_argument("--server-root", type=Path, default=REPO, help="checkout whose server to run")
    ap.add_argument("--server-arg", action="append", default=[], help="extra `serve` flag (repeatable)")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * args.idle + 256)), hard))
    tmp = Path(tempfile.mkdtemp(prefix="bench-attacks-"))
    write_dev_certs(tmp / "certs", ["localhost"])
    print(f"server: {args.server_root} {' '.join(args.server_arg)}; {os.cpu_count()} cores")
    for name in args.attacks.split(","):
        with Server(args.server_root, tmp / "certs", args.server_arg) as server:
            ATTACKS[name](server, args, tmp)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
