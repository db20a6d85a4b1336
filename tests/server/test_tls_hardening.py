"""What the TLS listener offers, and where the private key goes while it is loaded.

The cipher tests talk to the real server (``catalog-warden serve`` as a subprocess) with clients
that offer one kind of suite each. The key tests watch every file this process opens for writing
(a ``sys.addaudithook`` hook sees each ``open`` and ``os.open``) while the pair is loaded and
reloaded: staging the key in ``/tmp``, an emptyDir another container may mount, shows up there.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import Endpoint
from webhook import tls
from webhook.certs import make_ca, make_serving
from webhook.tls import ReloadingContext

CBC_SUITES = "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384"
AEAD_SUITES = ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"]


def handshake(endpoint: Endpoint, ctx: ssl.SSLContext) -> tuple[str, str]:
    """(protocol, cipher) a fresh connection negotiates; raises ssl.SSLError when none can be."""
    with (
        socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        name, protocol, _bits = tls.cipher()  # type: ignore[misc]
        return protocol, name


def tls12_client(endpoint: Endpoint, ciphers: str) -> ssl.SSLContext:
    ctx = endpoint.ssl_context()
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers)
    return ctx


def test_tls12_client_offering_only_cbc_suites_is_refused(server: Endpoint) -> None:
    # The server aborts the handshake (asyncio closes the socket: the client reads EOF or an alert);
    # the same client with an AEAD suite (the next test) proves nothing else is wrong with it.
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        handshake(server, tls12_client(server, CBC_SUITES))


@pytest.mark.parametrize("suite", AEAD_SUITES)
def test_tls12_client_offering_an_aead_suite_is_served(server: Endpoint, suite: str) -> None:
    assert handshake(server, tls12_client(server, suite)) == ("TLSv1.2", suite)


def test_tls12_client_offering_cbc_first_gets_an_aead_suite(server: Endpoint) -> None:
    protocol, suite = handshake(server, tls12_client(server, f"{CBC_SUITES}:{AEAD_SUITES[0]}"))
    assert (protocol, suite) == ("TLSv1.2", AEAD_SUITES[0])


def test_tls13_is_unchanged(server: Endpoint) -> None:
    ctx = server.ssl_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    protocol, suite = handshake(server, ctx)
    assert protocol == "TLSv1.3"
    assert suite in {"TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256"}


# ---- the private key ----------------------------------------------------------------------------

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_recording: list[list[str]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Records paths opened for writing while a test listens (hooks cannot be removed: it idles)."""
    if not _recording or event not in ("open", "os.mkdir"):
        return
    path = args[0]
    if event == "open":
        mode, flags = args[1], args[2]
        writes = any(c in (mode or "") for c in "wax+") or bool((flags or 0) & WRITE_FLAGS)
        if not writes or isinstance(path, int):
            return
    _recording[-1].append(os.fsdecode(path))


sys.addaudithook(_audit)


@contextlib.contextmanager
def writes() -> Iterator[list[str]]:
    """Every path this process opens for writing (or directory it makes) inside the block."""
    paths: list[str] = []
    _recording.append(paths)
    try:
        yield paths
    finally:
        _recording.remove(paths)


class Mount:
    """A certificate directory whose pair is replaced on :meth:`rotate` (contents only: enough here)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca, self.ca_key = make_ca()
        self.keys: list[bytes] = []
        self.rotate()

    def rotate(self) -> None:
        pair = make_serving(self.ca, self.ca_key, ["catalog-warden.catalog-warden.svc"])
        (self.root / "tls.crt").write_bytes(pair.cert_pem)
        (self.root / "tls.key").write_bytes(pair.key_pem)
        self.keys.append(pair.key_pem)


@pytest.fixture
def mount(tmp_path: Path) -> Mount:
    (tmp_path / "certs").mkdir()
    return Mount(tmp_path / "certs")


@pytest.fixture
def shared_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The process's temp directory (``tempfile`` and ``$TMPDIR``) pointed at one directory to inspect."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    return shared


def contents(directory: Path) -> list[bytes]:
    return [p.read_bytes() for p in directory.rglob("*") if p.is_file()]


def test_loading_and_reloading_the_pair_writes_no_file(mount: Mount, shared_tmp: Path) -> None:
    with writes() as written:
        ctx = ReloadingContext(mount.root)
    for _ in range(3):
        mount.rotate()
        with writes() as during_reload:
            assert ctx.reload() is True
        written += during_reload
    assert written == []  # nothing staged anywhere: not in /tmp, not in a private directory
    assert contents(shared_tmp) == []


@pytest.fixture
def no_memfd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "memfd_create")


@pytest.mark.usefixtures("no_memfd")
def test_without_memfd_the_key_is_staged_privately_and_removed(mount: Mount, shared_tmp: Path) -> None:
    cert, key = (mount.root / "tls.crt").read_bytes(), (mount.root / "tls.key").read_bytes()
    with tls._staged(cert, key) as (cert_path, key_path):
        modes = {stat.S_IMODE(os.stat(p).st_mode) for p in (cert_path, key_path)}
        assert (stat.S_IMODE(os.stat(Path(key_path).parent).st_mode), modes) == (0o700, {0o600})
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_path, key_path)
    ctx = ReloadingContext(mount.root)
    mount.rotate()
    with writes() as written:
        assert ctx.reload() is True
    assert written and all(Path(p).is_relative_to(shared_tmp) for p in written)
    assert contents(shared_tmp) == []  # removed as soon as it was loaded
