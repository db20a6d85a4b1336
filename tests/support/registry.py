"""A real OCI registry for tests: Debian's ``docker-registry`` 2.8.2 on a free 127.0.0.1 port.

Each :class:`RegistryServer` has its own config and data in a temporary directory (never the
package's own service on :5000), optional htpasswd Basic auth or Bearer token auth (with
:class:`TokenServer`, a small token issuer in a thread), optional TLS, and deletes enabled.
Helpers push Helm- and OCM-shaped artifacts with the media types of the reference (section 5)
and run the registry's offline ``garbage-collect``.

Basic auth uses a fixed bcrypt hash so the tests need no ``bcrypt`` package: the hash below is
``bcrypt.hashpw(b"warden-test-password", bcrypt.gensalt(rounds=4))``.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import io
import json
import os
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from webhook.registry.media_types import (
    HELM_CHART_CONTENT,
    HELM_CONFIG,
    OCI_INDEX,
    OCI_MANIFEST,
    OCM_COMPONENT_CONFIG,
    OCM_DESCRIPTOR_ANNOTATION,
    OCM_DESCRIPTOR_YAML_TAR,
)
from webhook.registry.ocm import component_descriptor_repository, ocm_tag

REGISTRY_BINARY = "/usr/bin/docker-registry"


class RegistryMissing(RuntimeError):
    """Debian's docker-registry is not installed (``tests/support/install.sh`` installs it)."""


TEST_USER = "warden"
TEST_PASSWORD = "warden-test-password"
TEST_PASSWORD_BCRYPT = "$2b$04$GejK3i4kt4lnV7xB1zLETOpD6ibbGAag1AZdAe.I.S5TjLS/dWgfq"
READY_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (the registry binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def poll(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.01) -> None:
    """Wait for ``condition`` with a deadline; raise naming ``what`` when it never holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# -- TLS material ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TlsFiles:
    """A CA and a serving certificate for 127.0.0.1 signed by it, as PEM files."""

    ca_pem: str
    cert_path: Path
    key_path: Path


def make_tls(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> TlsFiles:
    """Write a throwaway CA and a serving certificate for ``hosts`` (IP addresses and DNS names)."""
    import ipaddress

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "catalog-warden test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return TlsFiles(ca.public_bytes(serialization.Encoding.PEM).decode(), cert_path, key_path)


# -- token server ------------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass
class TokenRequest:
    """What the token server saw: the user (``None`` for anonymous) and the scopes asked for."""

    user: str | None
    service: str | None
    scopes: tuple[str, ...]


class TokenServer:
    """A Docker token-auth issuer on 127.0.0.1 that docker-registry 2.8 accepts.

    It signs ES256 JWTs whose ``x5c`` header carries its self-signed certificate (the registry's
    ``rootcertbundle``). Anonymous callers get ``pull`` on repositories only; ``users`` get every
    action they ask for; a wrong password gets 401. ``expires_in`` is what it reports to clients
    (the JWT itself stays valid for an hour so the registry's own clock never interferes).
    """

    service = "catalog-warden-test-registry"
    issuer = "catalog-warden-test-issuer"

    def __init__(self, directory: Path, users: dict[str, str] | None = None, expires_in: int = 300) -> None:
        self.users = dict(users if users is not None else {TEST_USER: TEST_PASSWORD})
        self.expires_in = expires_in
        self.requests: list[TokenRequest] = []
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "catalog-warden test token issuer")])
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        directory.mkdir(parents=True, exist_ok=True)
        self.rootcertbundle = directory / "token-issuer.pem"
        self.rootcertbundle.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.realm = f"http://127.0.0.1:{self._server.server_address[1]}/token"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)

    def start(self) -> TokenServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def grant(self, user: str | None, scope: str) -> list[str]:
        """The actions granted for one scope (anonymous: pull on repositories only)."""
        kind, _, rest = scope.partition(":")
        _, _, actions = rest.rpartition(":")
        wanted = [a for a in actions.split(",") if a]
        if user is None:
            return [a for a in wanted if kind == "repository" and a == "pull"]
        return wanted

    def sign(self, user: str | None, scopes: tuple[str, ...]) -> str:
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, _ = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": self.grant(user, scope)})
        now = int(time.time())
        header = {
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [base64.b64encode(self._cert.public_bytes(serialization.Encoding.DER)).decode()],
        }
        claims = {
            "iss": self.issuer,
            "sub": user or "",
            "aud": self.service,
            "exp": now + 3600,
            "nbf": now - 60,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        signing_input = _b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(claims).encode())
        r, s = decode_dss_signature(self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + "." + _b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                user: str | None = None
                header = self.headers.get("Authorization", "")
                if header.startswith("Basic "):
                    name, _, password = base64.b64decode(header[6:]).decode().partition(":")
                    if server.users.get(name) != password:
                        self._reply(401, {"details": "wrong credentials"})
                        return
                    user = name
                scopes = tuple(query.get("scope", []))
                server.requests.append(TokenRequest(user, (query.get("service") or [None])[0], scopes))
                self._reply(200, {"token": server.sign(user, scopes), "expires_in": server.expires_in})

            def _reply(self, status: int, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


# -- the registry process ----------------------------------------------------------------------


@dataclass
class RegistryServer:
    """One ``docker-registry serve`` process with its own config and data directory.

    ``auth`` is ``None`` (anonymous), ``"basic"`` (htpasswd with :data:`TEST_USER`) or a
    :class:`TokenServer`. Use as a context manager or call :meth:`start` / :meth:`stop`.
    """

    directory: Path
    auth: str | TokenServer | None = None
    tls: TlsFiles | None = None
    readonly: bool = False
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def hostname(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.hostname}"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def config_path(self) -> Path:
        return self.directory / "config.yml"

    @property
    def log_path(self) -> Path:
        return self.directory / "registry.log"

    def config(self) -> dict[str, Any]:
        storage: dict[str, Any] = {
            "filesystem": {"rootdirectory": str(self.data_dir)},
            "delete": {"enabled": True},
            "maintenance": {"uploadpurging": {"enabled": False}, "readonly": {"enabled": self.readonly}},
        }
        http: dict[str, Any] = {"addr": self.hostname, "headers": {"X-Content-Type-Options": ["nosniff"]}}
        if self.tls:
            http["tls"] = {"certificate": str(self.tls.cert_path), "key": str(self.tls.key_path)}
        config: dict[str, Any] = {
            "version": 0.1,
            "log": {"level": "info", "fields": {"service": "registry"}},
            "storage": storage,
            "http": http,
        }
        if self.auth == "basic":
            htpasswd = self.directory / "htpasswd"
            htpasswd.write_text(f"{TEST_USER}:{TEST_PASSWORD_BCRYPT}\n")
            config["auth"] = {"htpasswd": {"realm": "catalog-warden-test", "path": str(htpasswd)}}
        elif isinstance(self.auth, TokenServer):
            config["auth"] = {
                "token": {
                    "realm": self.auth.realm,
                    "service": self.auth.service,
                    "issuer": self.auth.issuer,
                    "rootcertbundle": str(self.auth.rootcertbundle),
                }
            }
        return config

    def write_config(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config()))

    def start(self) -> RegistryServer:
        """Start the process and wait until ``/v2/`` answers 200 or 401 (auth), with a deadline."""
        if not os.access(REGISTRY_BINARY, os.X_OK):  # one line saying what to install, never a skip
            raise RegistryMissing(f"{REGISTRY_BINARY} is not installed: run tests/support/install.sh")
        self.write_config()
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [REGISTRY_BINARY, "serve", str(self.config_path)], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        poll(self._ready, READY_TIMEOUT, f"docker-registry on {self.hostname} (log: {self.log_path})")
        return self

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"docker-registry exited with {self.process.returncode}:\n{self.log_path.read_text()}")
        try:
            answer = httpx.get(self.base_url + "/v2/", verify=False, timeout=1.0)
        except httpx.HTTPError:
            return False
        return answer.status_code in (200, 401)

    def stop(self, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL when ``kill``) and wait for the process to exit."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)

    def __enter__(self) -> RegistryServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop(kill=True)

    def garbage_collect(self, delete_untagged: bool = False, dry_run: bool = False) -> str:
        """Run ``docker-registry garbage-collect`` on this registry's config; return its output.

        The registry's GC is offline: run it with the registry stopped (or started ``readonly``).
        """
        args = [REGISTRY_BINARY, "garbage-collect"]
        if delete_untagged:
            args.append("--delete-untagged")
        if dry_run:
            args.append("--dry-run")
        done = subprocess.run([*args, str(self.config_path)], capture_output=True, text=True, timeout=60, check=True)
        return done.stdout + done.stderr

    def blob_digests(self) -> set[str]:
        """The digests of every blob stored on disk (what GC frees is what leaves this set)."""
        root = self.data_dir / "docker" / "registry" / "v2" / "blobs"
        if not root.exists():
            return set()
        return {f"{p.parent.parent.parent.name}:{p.parent.name}" for p in root.glob("*/*/*/data")}

    def http(self, **kwargs: Any) -> httpx.Client:
        """A sync httpx client for pushing fixtures (Basic auth added for a ``"basic"`` registry)."""
        if self.auth == "basic":
            kwargs.setdefault("auth", (TEST_USER, TEST_PASSWORD))
        if isinstance(self.auth, TokenServer):
            kwargs.setdefault("auth", _TokenPushAuth(self.auth))
        kwargs.setdefault("verify", False)
        return httpx.Client(base_url=self.base_url, timeout=10.0, **kwargs)


class _TokenPushAuth(httpx.Auth):
    """Push access for fixtures on a token registry: a token minted directly for the test user."""

    def __init__(self, issuer: TokenServer) -> None:
        self._issuer = issuer

    def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
        parts = request.url.path.split("/")
        if "manifests" in parts or "blobs" in parts:
            marker = parts.index("manifests") if "manifests" in parts else parts.index("blobs")
            scope = f"repository:{'/'.join(parts[2:marker])}:pull,push,delete"
        else:
            scope = "registry:catalog:*"
        request.headers["Authorization"] = "Bearer " + self._issuer.sign(TEST_USER, (scope,))
        yield request


@contextlib.contextmanager
def running_registry(auth: str | None = None, tls: bool = False) -> Iterator[RegistryServer]:
    """A registry in a fresh temporary directory, stopped and removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="warden-registry-") as tmp:
        directory = Path(tmp)
        server = RegistryServer(directory, auth=auth, tls=make_tls(directory / "tls") if tls else None)
        with server:
            yield server


# -- pushing artifacts -------------------------------------------------------------------------


@dataclass(frozen=True)
class Pushed:
    """An artifact in the registry: where it is, its manifest digest, and its config and layer blobs.

    The registry stores the manifest as a blob too, under ``digest``.
    """

    repository: str
    tag: str
    digest: str
    media_type: str
    blobs: tuple[str, ...]
    manifest: bytes


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push_blob(http: httpx.Client, repository: str, data: bytes) -> str:
    """Monolithic blob upload: POST for a session, then PUT with ``digest`` appended to its Location."""
    digest = _digest(data)
    started = http.post(f"/v2/{repository}/blobs/uploads/")
    assert started.status_code == 202, started.text
    location = started.headers["location"]
    location += ("&" if "?" in location else "?") + f"digest={digest}"
    done = http.put(location, content=data, headers={"Content-Type": "application/octet-stream"})
    assert done.status_code == 201, done.text
    return digest


def push_manifest(http: httpx.Client, repository: str, reference: str, manifest: dict[str, Any]) -> tuple[str, bytes]:
    """PUT a manifest under a tag (or digest); returns the registry's digest and the exact bytes."""
    body = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    answer = http.put(
        f"/v2/{repository}/manifests/{reference}", content=body, headers={"Content-Type": manifest["mediaType"]}
    )
    assert answer.status_code == 201, answer.text
    assert answer.headers["docker-content-digest"] == _digest(body)
    return answer.headers["docker-content-digest"], body


def push_artifact(
    http: httpx.Client,
    repository: str,
    tag: str,
    config_type: str,
    config: bytes,
    layers: list[tuple[str, bytes, dict[str, str]]],
    annotations: dict[str, str] | None = None,
) -> Pushed:
    """Push a config blob, layer blobs (media type, bytes, annotations) and an OCI image manifest."""
    config_digest = push_blob(http, repository, config)
    descriptors = []
    for media_type, data, layer_annotations in layers:
        descriptor: dict[str, Any] = {"mediaType": media_type, "digest": push_blob(http, repository, data)}
        descriptor["size"] = len(data)
        if layer_annotations:
            descriptor["annotations"] = layer_annotations
        descriptors.append(descriptor)
    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": config_type, "digest": config_digest, "size": len(config)},
        "layers": descriptors,
    }
    if annotations:
        manifest["annotations"] = annotations
    digest, body = push_manifest(http, repository, tag, manifest)
    return Pushed(repository, tag, digest, OCI_MANIFEST, (config_digest, *(d["digest"] for d in descriptors)), body)


def _tar(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def push_helm_chart(http: httpx.Client, base: str, name: str, version: str, payload: bytes = b"") -> Pushed:
    """A Helm chart as ``helm push`` lays it out: ``<base>/<name>:<version with + -> _>``."""
    chart = {"apiVersion": "v2", "name": name, "version": version, "type": "application"}
    content = _tar(f"{name}/Chart.yaml", yaml.safe_dump(chart).encode() + payload)
    repository = f"{base}/{name}".strip("/")
    return push_artifact(
        http,
        repository,
        version.replace("+", "_"),
        HELM_CONFIG,
        json.dumps(chart, sort_keys=True).encode(),
        [(HELM_CHART_CONTENT, content, {})],
        {"org.opencontainers.image.title": name, "org.opencontainers.image.version": version},
    )


def push_ocm_component(http: httpx.Client, base: str, component: str, version: str, payload: bytes = b"") -> Pushed:
    """An OCM component version in manifest form: ``<base>/component-descriptors/<component>:<ocm tag>``."""
    descriptor = {
        "meta": {"schemaVersion": "v2"},
        "component": {"name": component, "version": version, "provider": "catalog-warden-tests", "resources": []},
    }
    layer = _tar("component-descriptor.yaml", yaml.safe_dump(descriptor).encode() + payload)
    config = json.dumps(
        {
            "componentDescriptorLayer": {
                "mediaType": OCM_DESCRIPTOR_YAML_TAR,
                "digest": _digest(layer),
                "size": len(layer),
            }
        }
    ).encode()
    return push_artifact(
        http,
        component_descriptor_repository(base, component),
        ocm_tag(version),
        OCM_COMPONENT_CONFIG,
        config,
        [(OCM_DESCRIPTOR_YAML_TAR, layer, {OCM_DESCRIPTOR_ANNOTATION: "true"})],
        {"software.ocm.component.name": component, "software.ocm.component.version": version},
    )


def push_index(http: httpx.Client, repository: str, tag: str, children: list[Pushed]) -> Pushed:
    """An OCI index over already pushed manifests (the OCM index form, multi-arch images)."""
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": c.media_type, "digest": c.digest, "size": len(c.manifest)} for c in children],
    }
    digest, body = push_manifest(http, repository, tag, manifest)
    return Pushed(repository, tag, digest, OCI_INDEX, (), body)


__all__ = [
    "TEST_PASSWORD",
    "TEST_USER",
    "Pushed",
    "RegistryServer",
    "TlsFiles",
    "TokenRequest",
    "TokenServer",
    "free_port",
    "make_tls",
    "poll",
    "push_artifact",
    "push_blob",
    "push_helm_chart",
    "push_index",
    "push_manifest",
    "push_ocm_component",
    "running_registry",
]
