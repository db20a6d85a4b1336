"""Start a real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager.

The binaries come from ``build.sh`` beside this module (DESIGN.md section 9), which alone knows
the pinned versions and the cache directory; :func:`bin_dir` asks it. Everything a run writes
(etcd's data, certificates, keys, kubeconfigs, one log per process) lives in one temporary
directory, so a failure can be read after the fact; :class:`ControlPlaneError` carries the last
log lines of the process that failed.

The apiserver is set up as a cluster's would be where it matters to an admission webhook: TLS on
127.0.0.1 only, client certificates and service-account tokens, ``Node,RBAC`` authorization, the
default admission plugins plus the webhook plugins, and ``--enable-aggregator-routing`` so a
Service resolves through its EndpointSlice to an address on this machine. The controller manager
runs the garbage collector and the namespace controller (and the service-account controllers)
with per-controller service-account credentials, so they act as
``system:serviceaccount:kube-system:generic-garbage-collector`` and ``...:namespace-controller``.

No pytest here: the fixtures that use it decide what a missing binary means.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.support.server import free_port
from webhook.certs import Pair, make_ca, make_client, make_serving

BUILD_SCRIPT = Path(__file__).resolve().parent / "build.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
CONTROLLERS = ("garbagecollector", "namespace", "serviceaccount", "serviceaccount-token")
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
APISERVER_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
FRONT_PROXY_CLIENT = "front-proxy-client"
UNCACHED_RESOURCES = ("referencegrants.solar.opendefense.cloud",)
"""Served without kube-apiserver's watch cache, so a watch from a compacted resourceVersion reaches
etcd and gets a real 410 Gone (with the cache, the apiserver serves it from its own window and
compaction never shows). Only the cluster tier's 410 test watches them (tests/cluster/test_watch_gone.py)."""
READY_TIMEOUT = 120.0  # a cold apiserver on a busy 2-core machine takes tens of seconds
STOP_TIMEOUT = 15.0
LOG_TAIL_LINES = 30


class ControlPlaneError(RuntimeError):
    """The control plane could not start; the message names the process and ends with its log."""


def bin_dir() -> Path:
    """Where ``build.sh`` puts the binaries of its pinned versions (it builds nothing when asked)."""
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-bin-dir"], check=True, capture_output=True, text=True, timeout=30
    )
    return Path(out.stdout.strip())


def missing_binaries(directory: Path | None = None) -> list[str]:
    """The binaries ``build.sh`` has not built yet (empty when the control plane can start)."""
    directory = directory or bin_dir()
    return [name for name in BINARIES if not os.access(directory / name, os.X_OK)]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


@dataclass
class Process:
    """One started binary, its log file, and how to stop it: SIGTERM, then SIGKILL."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def failure(self, what: str) -> ControlPlaneError:
        return ControlPlaneError(f"{self.name} {what} (log {self.log}); last lines:\n{log_tail(self.log)}")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        if not self.alive():
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout)


@dataclass(frozen=True)
class Credentials:
    """A client certificate's files, as a kubeconfig user and as an httpx ``cert``."""

    cert: Path
    key: Path


@dataclass
class ControlPlane:
    """A running control plane: where to reach it and with what, plus its processes."""

    workdir: Path
    url: str
    ca: Path
    admin: Credentials
    kubeconfig: Path
    service_account_key: Path
    ca_key: Path
    """The client CA's key: :meth:`user_kubeconfig` signs certificates for any user and groups."""
    etcd_url: str = ""
    """etcd's client URL (plain HTTP on 127.0.0.1): its v3 gateway serves ``/v3/kv/*`` (compaction)."""
    processes: list[Process] = field(default_factory=list)

    def client(self, timeout: float = 10.0) -> httpx.Client:
        """An httpx client authenticated as the admin (group ``system:masters``)."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.admin.cert), str(self.admin.key))
        return httpx.Client(base_url=self.url, verify=context, timeout=timeout)

    def user_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig authenticating as ``user`` in ``groups`` by a client certificate.

        kube-apiserver's x509 authenticator reads the user from the common name and the groups from
        the organizations, as it would for a human's certificate; no RBAC comes with it (bind what
        the test needs, or pass ``system:masters``).
        """
        ca = Pair(self.ca.read_bytes(), self.ca_key.read_bytes())
        key = serialization.load_pem_private_key(ca.key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey), "the control plane CA is an EC key (webhook.certs)"
        pair = make_client(ca, key, user, list(groups), days=2)
        directory = self.workdir / "users"
        directory.mkdir(exist_ok=True)
        stem = hashlib.sha256("\0".join([user, *groups]).encode()).hexdigest()[:16]
        credentials = Credentials(
            _write(directory / f"{stem}.crt", pair.cert_pem), _write(directory / f"{stem}.key", pair.key_pem, True)
        )
        return _write_kubeconfig(directory / f"{stem}.kubeconfig", self.url, self.ca, user, credentials)

    def check_running(self) -> None:
        for process in self.processes:
            if not process.alive():
                raise process.failure(f"exited with status {process.popen.returncode}")

    def stop(self) -> None:
        """Stop the controller manager, then the apiserver, then etcd (the reverse of start)."""
        for process in reversed(self.processes):
            process.stop()


# -- files --------------------------------------------------------------------------------------


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


def _write_kubeconfig(path: Path, url: str, ca: Path, user: str, credentials: Credentials) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "controlplane", "cluster": {"server": url, "certificate-authority": str(ca)}}],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(credentials.cert), "client-key": str(credentials.key)},
            }
        ],
        "contexts": [{"name": user, "context": {"cluster": "controlplane", "user": user}}],
        "current-context": user,
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML: kubectl and clients read it
    return path


@dataclass(frozen=True)
class _Pki:
    ca: Path
    ca_key: Path
    serving: Credentials
    admin: Credentials
    front_proxy_ca: Path
    front_proxy_client: Credentials
    controller_manager: Credentials
    service_account_key: Path
    service_account_public: Path


def _write_pki(directory: Path) -> _Pki:
    """One CA for serving and client certificates, one for the aggregator's front proxy (kept apart,
    as kubeadm does: a client certificate must never pass for the proxy), and the RSA key that
    signs service-account tokens."""
    directory.mkdir(parents=True)
    ca, ca_key = make_ca("catalog-warden control plane CA", days=2)
    front_proxy_ca, front_proxy_key = make_ca("catalog-warden front proxy CA", days=2)
    front_proxy_client = make_client(front_proxy_ca, front_proxy_key, FRONT_PROXY_CLIENT, days=2)
    serving = make_serving(ca, ca_key, list(APISERVER_NAMES), days=2)
    admin = make_client(ca, ca_key, "catalog-warden-test-admin", ["system:masters"], days=2)
    # The user the bootstrap RBAC policy binds to the system:kube-controller-manager ClusterRole.
    controller_manager = make_client(ca, ca_key, "system:kube-controller-manager", days=2)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def pair(name: str, certificate: bytes, key: bytes) -> Credentials:
        return Credentials(
            _write(directory / f"{name}.crt", certificate), _write(directory / f"{name}.key", key, private=True)
        )

    return _Pki(
        ca=_write(directory / "ca.crt", ca.cert_pem),
        ca_key=_write(directory / "ca.key", ca.key_pem, private=True),
        serving=pair("apiserver", serving.cert_pem, serving.key_pem),
        admin=pair("admin", admin.cert_pem, admin.key_pem),
        front_proxy_ca=_write(directory / "front-proxy-ca.crt", front_proxy_ca.cert_pem),
        front_proxy_client=pair("front-proxy-client", front_proxy_client.cert_pem, front_proxy_client.key_pem),
        controller_manager=pair("controller-manager", controller_manager.cert_pem, controller_manager.key_pem),
        service_account_key=_write(
            directory / "sa.key",
            sa_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
            private=True,
        ),
        service_account_public=_write(
            directory / "sa.pub",
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        ),
    )


# -- processes ----------------------------------------------------------------------------------


def _spawn(name: str, argv: Sequence[str], logs: Path) -> Process:
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    return Process(name, popen, log)


def _etcd_args(binary: Path, data: Path, client_port: int, peer_port: int) -> list[str]:
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    return [
        str(binary),
        "--name=controlplane",
        f"--data-dir={data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=controlplane={peer}",
        "--unsafe-no-fsync=true",  # a throwaway store: durability is not under test, speed is
        "--log-level=warn",
    ]


def _apiserver_args(binary: Path, pki: _Pki, etcd_port: int, port: int, cert_dir: Path) -> list[str]:
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={pki.serving.cert}",
        f"--tls-private-key-file={pki.serving.key}",
        f"--client-ca-file={pki.ca}",
        "--authorization-mode=Node,RBAC",
        # Added to the default plugins (which already include both in recent releases); named so
        # the dependency is visible.
        "--enable-admission-plugins=ValidatingAdmissionWebhook,MutatingAdmissionWebhook",
        "--enable-aggregator-routing=true",
        # The aggregation layer's front proxy: what an aggregated apiserver (and the controller
        # manager's delegated authentication) trusts for the X-Remote-* identity headers.
        f"--requestheader-client-ca-file={pki.front_proxy_ca}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki.front_proxy_client.cert}",
        f"--proxy-client-key-file={pki.front_proxy_client.key}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.service_account_public}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        f"--watch-cache-sizes={','.join(f'{resource}#0' for resource in UNCACHED_RESOURCES)}",
        "--profiling=false",
    ]


def _controller_manager_args(binary: Path, pki: _Pki, kubeconfig: Path, port: int, cert_dir: Path) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--controllers={','.join(CONTROLLERS)}",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.service_account_key}",
        f"--root-ca-file={pki.ca}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--profiling=false",
    ]


def _wait_ready(plane: ControlPlane, process: Process, client: httpx.Client, path: str, timeout: float) -> None:
    """Poll ``path`` until it answers 200, failing early when a process exits."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        plane.check_running()
        try:
            response = client.get(path)
            if response.status_code == 200:
                return
            last = f"HTTP {response.status_code}: {response.text[-500:]}"
        except httpx.HTTPError as error:
            last = f"{type(error).__name__}: {error}"
        if time.monotonic() > deadline:
            raise process.failure(f"not ready after {timeout:.0f}s ({path}: {last})")
        time.sleep(0.2)


@contextlib.contextmanager
def control_plane(
    workdir: Path | None = None, binaries: Path | None = None, ready_timeout: float = READY_TIMEOUT
) -> Iterator[ControlPlane]:
    """Start etcd, kube-apiserver and kube-controller-manager; yield once ``/readyz`` says ready.

    Everything is stopped on exit. ``workdir`` (default: a new temporary directory, removed on a
    clean exit, kept after a failure so its logs can be read) holds all state and logs.
    """
    binaries = binaries or bin_dir()
    missing = missing_binaries(binaries)
    if missing:
        raise ControlPlaneError(f"{', '.join(missing)} not built in {binaries}: run {BUILD_SCRIPT}")
    owned = workdir is None
    workdir = workdir or Path(tempfile.mkdtemp(prefix="catalog-warden-controlplane-"))
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pki = _write_pki(workdir / "pki")
    apiserver_port = free_port()
    url = f"https://127.0.0.1:{apiserver_port}"
    plane = ControlPlane(
        workdir=workdir,
        url=url,
        ca=pki.ca,
        admin=pki.admin,
        kubeconfig=_write_kubeconfig(workdir / "admin.kubeconfig", url, pki.ca, "admin", pki.admin),
        service_account_key=pki.service_account_key,
        ca_key=pki.ca_key,
    )
    clean = False
    try:
        etcd_port = free_port()
        plane.etcd_url = f"http://127.0.0.1:{etcd_port}"
        etcd = _spawn("etcd", _etcd_args(binaries / "etcd", workdir / "etcd", etcd_port, free_port()), logs)
        plane.processes.append(etcd)
        with httpx.Client(base_url=f"http://127.0.0.1:{etcd_port}", timeout=5.0) as client:
            _wait_ready(plane, etcd, client, "/health", ready_timeout)
        apiserver = _spawn(
            "kube-apiserver",
            _apiserver_args(binaries / "kube-apiserver", pki, etcd_port, apiserver_port, workdir / "apiserver-certs"),
            logs,
        )
        plane.processes.append(apiserver)
        with plane.client(timeout=5.0) as client:
            _wait_ready(plane, apiserver, client, "/readyz", ready_timeout)
        kcm_kubeconfig = _write_kubeconfig(
            workdir / "controller-manager.kubeconfig", url, pki.ca, "controller-manager", pki.controller_manager
        )
        plane.processes.append(
            _spawn(
                "kube-controller-manager",
                _controller_manager_args(
                    binaries / "kube-controller-manager", pki, kcm_kubeconfig, free_port(), workdir / "kcm-certs"
                ),
                logs,
            )
        )
        yield plane
        plane.check_running()  # a process that died under the test is a failure, with its log
        clean = True
    finally:
        plane.stop()
        if owned and clean:
            shutil.rmtree(workdir, ignore_errors=True)
