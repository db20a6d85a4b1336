"""The serving TLS context and its hot reload.

cert-manager rewrites a mounted Secret through an atomic symlink swap, which file-event APIs do
not report reliably, so the pair is polled (as controller-runtime's certwatcher does). A changed
pair is first loaded into a scratch context; only if that succeeds is it loaded into the live
context, which affects new handshakes while connections in flight keep their session. An
unreadable or mismatched pair keeps the last good one, is logged, and is counted.

The private key is never written to a file system another process could read:
``load_cert_chain`` takes only paths, so the bytes are staged in anonymous memory files
(``memfd_create``) and loaded through ``/proc/self/fd``. Nothing lands in ``/tmp``, which in a pod
is an emptyDir another container may mount. Where memfd does not exist (macOS, or no /proc) the
pair is staged in a private 0700 directory and removed at once.

TLS 1.2 offers only ECDHE key exchange with AEAD ciphers (AES-GCM, ChaCha20-Poly1305): the ECDHE
part of Mozilla's "intermediate" profile. CBC suites (Lucky13 and the padding oracles) are not
offered; Go's crypto/tls, which the apiserver's webhook client uses, offers these by default.
TLS 1.3 suites are all AEAD and stay OpenSSL's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

from webhook.metrics import Metrics

log = logging.getLogger("catalog_warden.tls")

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!PSK:!aNULL"
"""OpenSSL's cipher list for TLS 1.2: ECDHE with AES-GCM or ChaCha20-Poly1305 (ECDSA or RSA keys)."""
PROC_FDS = "/proc/self/fd"


class CertError(Exception):
    """A certificate or key that cannot be used; the message names the path."""


def _new_context(client_ca: Path | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)
    if client_ca is not None:
        try:
            ctx.load_verify_locations(cafile=str(client_ca))
        except (OSError, ssl.SSLError) as exc:
            raise CertError(f"cannot load client CA {client_ca}: {exc}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class ReloadingContext:
    """An SSLContext whose certificate pair follows the files in ``cert_dir``."""

    def __init__(self, cert_dir: Path, client_ca: Path | None = None, metrics: Metrics | None = None) -> None:
        self.cert_dir = cert_dir
        self.cert_path = cert_dir / CERT_FILE
        self.key_path = cert_dir / KEY_FILE
        self._client_ca = client_ca
        self._metrics = metrics
        self.context = _new_context(client_ca)
        self._fingerprint = ""
        pair = self._read()
        self._load(self.context, *pair)
        self._fingerprint = _digest(*pair)

    def _read(self) -> tuple[bytes, bytes]:
        try:
            return self.cert_path.read_bytes(), self.key_path.read_bytes()
        except OSError as exc:
            raise CertError(f"cannot read {exc.filename}: {exc.strerror}") from None

    def _load(self, ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
        # load_cert_chain only takes paths; stage the exact bytes we fingerprinted so a second
        # swap between read and load cannot pair one generation's cert with another's key.
        try:
            with _staged(cert, key) as (c, k):
                ctx.load_cert_chain(certfile=c, keyfile=k)
        except (OSError, ssl.SSLError) as exc:
            raise CertError(f"cannot load the pair {self.cert_path} / {self.key_path}: {exc}") from None

    def reload(self) -> bool:
        """Load the pair if it changed. True when a new pair is now served."""
        try:
            pair = self._read()
        except CertError as exc:
            return self._reject(str(exc), "")
        fingerprint = _digest(*pair)
        if fingerprint == self._fingerprint:
            return False
        try:
            self._load(_new_context(self._client_ca), *pair)  # scratch: proves the pair is usable
            self._load(self.context, *pair)
        except CertError as exc:
            return self._reject(str(exc), fingerprint)
        self._fingerprint = fingerprint
        log.info("serving certificate reloaded", extra={"fields": {"path": str(self.cert_path)}})
        if self._metrics is not None:
            self._metrics.cert_reloads.inc()
        return True

    def _reject(self, why: str, fingerprint: str) -> bool:
        if fingerprint and fingerprint == getattr(self, "_rejected", None):
            return False  # already reported this broken generation
        self._rejected = fingerprint
        log.error("certificate reload failed; keeping the last good pair", extra={"fields": {"error": why}})
        if self._metrics is not None:
            self._metrics.cert_reload_errors.inc()
        return False

    async def watch(self, interval: float, stop: asyncio.Event) -> None:
        """Poll every ``interval`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=interval)
            except TimeoutError:
                self.reload()


@contextlib.contextmanager
def _staged(cert: bytes, key: bytes) -> Iterator[tuple[str, str]]:
    """Paths that read as ``cert`` and ``key``, readable by this process only, gone on exit."""
    if not hasattr(os, "memfd_create") or not os.path.isdir(PROC_FDS):
        with _private_dir(cert, key) as paths:
            yield paths
        return
    fds = [os.memfd_create(f"catalog-warden-{name}", os.MFD_CLOEXEC) for name in (CERT_FILE, KEY_FILE)]
    try:
        for fd, data in zip(fds, (cert, key), strict=True):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        yield f"{PROC_FDS}/{fds[0]}", f"{PROC_FDS}/{fds[1]}"
    finally:
        for fd in fds:
            os.close(fd)


@contextlib.contextmanager
def _private_dir(cert: bytes, key: bytes) -> Iterator[tuple[str, str]]:
    """The fallback without memfd: a 0700 directory (``mkdtemp``), files 0600, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="catalog-warden-tls-") as tmp:
        paths = []
        for name, data in ((CERT_FILE, cert), (KEY_FILE, key)):
            path = os.path.join(tmp, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            paths.append(path)
        yield paths[0], paths[1]


def _digest(cert: bytes, key: bytes) -> str:
    return hashlib.sha256(cert + b"\0" + key).hexdigest()
