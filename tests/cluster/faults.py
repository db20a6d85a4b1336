"""Fault injection for the cluster tier: TCP proxies in front of kube-apiserver (or a webhook
port), kubeconfigs that go through them, and etcd's maintenance API.

:class:`HoldingProxy` is ``tests/kube/tcp_proxy.py``'s proxy (cut, blackhole, heal) plus
:meth:`~HoldingProxy.hold`: what clients send (on open connections or new ones) waits,
unforwarded, until :meth:`~HoldingProxy.release` forwards it; what servers send still flows. An
informer whose watch the server ended cleanly resumes from its last resourceVersion (on the same
kept-alive connection); held, that resume waits while the test writes and compacts etcd, and is
then sent from a version etcd no longer has (a real 410).
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
from pathlib import Path

import httpx

from tests.kube.tcp_proxy import TcpProxy, _Link


class HoldingProxy(TcpProxy):
    def __enter__(self) -> HoldingProxy:
        super().__enter__()
        return self

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__(upstream)
        self._holding = False
        self._held: list[socket.socket] = []
        self._pending: list[tuple[socket.socket, bytes]] = []

    def hold(self) -> None:
        """From now on nothing a client sends is forwarded until :meth:`release`; answers still flow.

        Open connections keep delivering what the server sends (a watch's end, say), while a
        client's next request on them (a resume, over the kept-alive connection) and every new
        connection wait.
        """
        with self._lock:
            self._holding = True

    def held(self) -> int:
        """Chunks and connections waiting to be forwarded."""
        with self._lock:
            return len(self._pending) + len(self._held)

    def release(self) -> None:
        """Forward, in order, what was held; then forward as usual."""
        with self._lock:  # pumps check ``_holding`` under the lock: nothing overtakes the held bytes
            for dst, data in self._pending:
                with contextlib.suppress(OSError):
                    dst.sendall(data)
            self._pending.clear()
            self._holding = False
            held, self._held = self._held, []
        for client in held:
            self._forward(client)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                if self._holding:
                    self._held.append(client)
                    continue
                if self.is_cut.is_set():
                    self._hanging.append(client)  # as TcpProxy: never read, never answered
                    continue
            self._forward(client)

    def _forward(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        link = _Link(client, upstream)
        with self._lock:
            self._links.append(link)
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(link, src, dst), daemon=True).start()

    def _pump(self, link: _Link, src: socket.socket, dst: socket.socket) -> None:  # type: ignore[override]
        towards_server = src is link.client
        try:
            while data := src.recv(65536):
                if towards_server:
                    with self._lock:
                        if self._holding:
                            self._pending.append((dst, data))
                            continue
                if not link.silent.is_set():
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            if not link.silent.is_set():
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)


def upstream_of(url: str) -> tuple[str, int]:
    """``https://127.0.0.1:6443`` -> ``("127.0.0.1", 6443)``."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    return host, int(port)


def kubeconfig_via(kubeconfig: Path, url: str, path: Path) -> Path:
    """A copy of ``kubeconfig`` (same identity, same CA) whose server is ``url``, e.g. a proxy.

    The apiserver's certificate names 127.0.0.1, so TLS through a proxy on 127.0.0.1 verifies.
    """
    config = json.loads(kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = url
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


def etcd_revision(etcd_url: str) -> int:
    """etcd's current revision (the header of any range; the v3 gateway speaks JSON, keys base64)."""
    body = {"key": base64.b64encode(b"/").decode(), "limit": 1}
    answer = httpx.post(f"{etcd_url}/v3/kv/range", json=body, timeout=10)
    answer.raise_for_status()
    return int(answer.json()["header"]["revision"])


def etcd_compact(etcd_url: str, revision: int) -> None:
    """Compact etcd's history up to ``revision`` (physical: returns once it is done)."""
    answer = httpx.post(f"{etcd_url}/v3/kv/compaction", json={"revision": str(revision), "physical": True}, timeout=30)
    answer.raise_for_status()
