"""catalog-warden installed on the real control plane, as a cluster admin would install it.

:func:`installed` starts the control plane (:mod:`.launcher`), renders ``manifests/`` with
``kubectl kustomize`` (the base, as shipped), server-side applies it with the admin kubeconfig,
then does what cert-manager and the kubelet would have done:

- cert-manager's issuer: a development CA and a serving certificate for the ``dnsNames`` of the
  shipped Certificate (``webhook.certs``). The cert-manager objects themselves (Issuer,
  Certificate) are not applied: their CRDs are not installed here. :data:`NOT_INSTALLED_GROUPS`.
- cert-manager's cainjector: the CA written into ``caBundle`` of every webhook and CRD conversion
  config whose object carries ``cert-manager.io/inject-ca-from``, by its own field manager.
- the kubelet and the EndpointSlice controller: ``catalog-warden serve`` runs as a process on
  127.0.0.1 (cwd the repository root), and an EndpointSlice of the ``catalog-warden`` Service
  points at it, so kube-apiserver (``--enable-aggregator-routing``: its service resolver reads
  EndpointSlices) calls our webhooks there.

The server and the sidecar authenticate with tokens of the ServiceAccounts that
``manifests/deploy/rbac.yaml`` binds (TokenRequest, as a projected token would be), never as
admin, so a missing or excess permission in the shipped RBAC shows. No pytest here: the fixtures
decide what a missing prerequisite means (:func:`missing_prerequisite`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.controlplane.launcher import (
    BUILD_SCRIPT,
    ControlPlane,
    ControlPlaneError,
    bin_dir,
    control_plane,
    log_tail,
    missing_binaries,
)
from tests.support.server import free_port
from webhook.certs import write_dev_certs
from webhook.kube.client import JSON_PATCH, ApiError, Conflict, Kube, NotFound, build_api_client

Obj = dict[str, Any]

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "manifests"
INSTALL_SCRIPT = REPO / "tests" / "support" / "install.sh"

NAMESPACE = "catalog-warden"
SERVER_ACCOUNT = "catalog-warden-server"
"""The ServiceAccount the shipped server Deployment runs as (list and watch only)."""
SIDECAR_ACCOUNT = "catalog-warden"
"""The ServiceAccount the shipped sidecar Deployment runs as (the ``warden`` identity)."""
SERVICE = "catalog-warden"
CONFIG_MAP = "catalog-warden-config"
CERTIFICATE = "catalog-warden-serving"
INJECT_CA_FROM = "cert-manager.io/inject-ca-from"
CAINJECTOR = "cert-manager-cainjector"
"""The field manager the caBundle is written with: the one cert-manager's cainjector uses."""
NOT_INSTALLED_GROUPS = frozenset({"cert-manager.io"})
"""API groups of shipped objects not applied: no cert-manager (nor its CRDs) runs here."""
ENDPOINTS_MANAGER = "catalog-warden-tests"
ENDPOINT_HOST = "127.0.0.1"
"""The address in the EndpointSlice, as an FQDN: a loopback IP in an IPv4 slice is refused."""
TOKEN_SECONDS = 24 * 3600
READY_TIMEOUT = 60.0
"""Seconds a process or the webhook path may take to become ready (a busy 2-core machine)."""
STOP_TIMEOUT = 15.0
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SLICES = f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"


class ClusterError(RuntimeError):
    """The install could not complete; the message says which step and why."""


def kubectl_binary() -> str | None:
    return shutil.which("kubectl")


def missing_prerequisite() -> str:
    """One line naming what to install before the cluster tier can run; ``""`` when nothing is missing."""
    if kubectl_binary() is None:
        return f"kubectl is not installed: run {INSTALL_SCRIPT.relative_to(REPO)} (apt-get install kubectl)"
    try:
        binaries = bin_dir()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot ask {BUILD_SCRIPT.relative_to(REPO)} where the control plane is ({exc})"
    missing = missing_binaries(binaries)
    if missing:
        return (
            f"the control plane is not built ({', '.join(missing)} missing in {binaries}): "
            f"run {INSTALL_SCRIPT.relative_to(REPO)}"
        )
    return ""


def wait_for(condition: Callable[[], bool], what: str, timeout: float = READY_TIMEOUT) -> None:
    """Poll ``condition`` until true; fail after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


# -- manifests ----------------------------------------------------------------------------------


STANDALONE_COMPONENTS = ("standalone-catalog", "standalone-packages", "standalone-charts")
"""No upstream server runs in this control plane, so every family is installed standalone: the base
plus ``manifests/components/standalone-<family>`` (their CRDs and mode), as docs/install.md says."""


def render(manifests: Path = MANIFESTS, components: Sequence[str] = STANDALONE_COMPONENTS) -> list[Obj]:
    """``kubectl kustomize`` of an overlay of the base with ``components``, as ``kubectl apply -k`` would send it."""
    kubectl = kubectl_binary() or "kubectl"
    with tempfile.TemporaryDirectory(prefix="overlay-") as where:
        root = os.path.relpath(manifests, where)
        overlay = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [root],
            "components": [f"{root}/components/{name}" for name in components],
        }
        (Path(where) / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
        done = subprocess.run([kubectl, "kustomize", where], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ClusterError(f"kubectl kustomize {manifests} with {', '.join(components)} failed: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def group_of(obj: Obj) -> str:
    api_version = str(obj["apiVersion"])
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def find(docs: Sequence[Obj], kind: str, name: str) -> Obj:
    for doc in docs:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise ClusterError(f"manifests/ ship no {kind} {name}")


def to_yaml(docs: Sequence[Obj]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


# -- identities ---------------------------------------------------------------------------------


def token_kubeconfig(path: Path, plane: ControlPlane, user: str, token: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "controlplane", "cluster": {"server": plane.url, "certificate-authority": str(plane.ca)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "controlplane", "user": user}}],
        "current-context": user,
    }
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


# -- processes ----------------------------------------------------------------------------------


@dataclass
class WardenProcess:
    """One ``python -m webhook.cli ...`` process (cwd the repository root) and its readiness probe.

    Ports are fixed at construction, so :meth:`restart` comes back where the EndpointSlice points.
    The log is appended to across restarts.
    """

    name: str
    argv: list[str]
    probe_url: str
    log: Path
    ready_timeout: float = READY_TIMEOUT
    popen: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, wait_ready: bool = True) -> WardenProcess:
        if self.alive:
            raise RuntimeError(f"{self.name} is already running")
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "webhook.cli", *self.argv],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
            )
        if wait_ready:
            self.wait_ready()
        return self

    def readiness(self) -> tuple[int, str]:
        """``/readyz``'s status and body (0 and the error while nothing answers)."""
        try:
            answer = httpx.get(f"{self.probe_url}/readyz", timeout=2.0)
        except httpx.HTTPError as exc:
            return 0, f"{type(exc).__name__}: {exc}"
        return answer.status_code, answer.text

    def ready(self) -> bool:
        return self.readiness()[0] == 200

    def wait_ready(self, timeout: float | None = None) -> None:
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive:
                code = self.popen.returncode if self.popen else None
                raise ClusterError(f"{self.name} exited with {code}; last lines of {self.log}:\n{log_tail(self.log)}")
            status, body = self.readiness()
            if status == 200:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{self.name} not ready after {timeout:.0f}s (/readyz: {status} {body}); "
                    f"last lines of {self.log}:\n{log_tail(self.log)}"
                )
            time.sleep(0.1)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL after ``timeout``."""
        if not self.alive:
            return
        assert self.popen is not None
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to clean up."""
        if self.alive:
            assert self.popen is not None
            self.popen.kill()
            self.popen.wait(STOP_TIMEOUT)

    def restart(self, wait_ready: bool = True) -> WardenProcess:
        self.stop()
        return self.start(wait_ready)

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class ServerProcess(WardenProcess):
    """``catalog-warden serve`` as the server ServiceAccount; ``port`` is what its EndpointSlice names."""

    port: int = 0
    probe_port: int = 0


@dataclass
class SidecarProcess(WardenProcess):
    """``catalog-warden sidecar`` as the sidecar ServiceAccount; ``events_port`` serves its probes."""

    events_port: int = 0


# -- the installed cluster ----------------------------------------------------------------------


@dataclass
class Cluster:
    """The control plane with the shipped manifests applied, and the helpers tests act through."""

    plane: ControlPlane
    workdir: Path
    rendered: list[Obj]
    """Every object ``kubectl kustomize manifests`` renders, cert-manager's included."""
    applied: list[Obj]
    """What was applied: ``rendered`` less :data:`NOT_INSTALLED_GROUPS`."""
    certs: Path
    """The webhook's serving pair (``tls.crt``, ``tls.key``) and the CA injected as caBundle."""
    admin: Kube
    config: Path
    """The shipped ConfigMap catalog-warden-config as the Deployments mount it: a directory, one file a key."""
    processes: list[WardenProcess] = field(default_factory=list)
    _kubeconfigs: dict[tuple[str, ...], Path] = field(default_factory=dict)

    # ---- identities --------------------------------------------------------------------------

    def user(self, name: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for the human ``name`` in ``groups`` (a client certificate)."""
        key = ("user", name, *groups)
        if key not in self._kubeconfigs:
            self._kubeconfigs[key] = self.plane.user_kubeconfig(name, groups)
        return self._kubeconfigs[key]

    def token(self, namespace: str, account: str, seconds: int = TOKEN_SECONDS) -> str:
        """A bound token of ServiceAccount ``namespace/account`` from the TokenRequest API (as admin)."""
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        return str(self.admin.request("POST", path, body=body)["status"]["token"])

    def service_account(self, namespace: str, account: str) -> Path:
        """A kubeconfig holding a bound token of ServiceAccount ``namespace/account``."""
        key = ("sa", namespace, account)
        if key not in self._kubeconfigs:
            directory = self.workdir / "tokens"
            directory.mkdir(exist_ok=True)
            user = f"system:serviceaccount:{namespace}:{account}"
            self._kubeconfigs[key] = token_kubeconfig(
                directory / f"{namespace}.{account}.kubeconfig", self.plane, user, self.token(namespace, account)
            )
        return self._kubeconfigs[key]

    def ensure_service_account(self, namespace: str, account: str) -> Path:
        """Create ``namespace`` and the ServiceAccount if missing; its kubeconfig."""
        with contextlib.suppress(Conflict):  # AlreadyExists
            self.admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        with contextlib.suppress(Conflict):
            self.admin.request(
                "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={"metadata": {"name": account}}
            )
        return self.service_account(namespace, account)

    def kube(self, kubeconfig: Path) -> Kube:
        """The project's own client (``webhook.kube.client``) with ``kubeconfig``'s identity."""
        return Kube(build_api_client(kubeconfig))

    def kubectl(
        self, *args: str, kubeconfig: Path | None = None, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run the machine's kubectl as ``kubeconfig``'s identity (default: admin); never raises on failure."""
        kubectl = kubectl_binary() or "kubectl"
        return subprocess.run(
            [kubectl, f"--kubeconfig={kubeconfig or self.plane.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        self.admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name, "labels": labels or {}}})
        return name

    # ---- install -----------------------------------------------------------------------------

    def apply(self, docs: Sequence[Obj]) -> None:
        """``kubectl apply --server-side`` as admin; ``--force-conflicts`` takes back fields a test changed."""
        done = self.kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager=kubectl", "-f", "-", input=to_yaml(docs)
        )
        if done.returncode != 0:
            raise ClusterError(f"kubectl apply --server-side of manifests/ failed:\n{done.stdout}{done.stderr}")

    def established(self, name: str) -> bool:
        conditions = (self.admin.request("GET", f"{CRD_API}/{name}").get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    def crd_names(self) -> list[str]:
        return [d["metadata"]["name"] for d in self.applied if d["kind"] == "CustomResourceDefinition"]

    def inject_ca_bundle(self) -> list[str]:
        """Write the CA into every object annotated for cert-manager's cainjector; the objects' names.

        A JSON patch per caBundle field, under the cainjector's field manager, so nothing else in
        the shipped object changes (a merge patch would replace the whole ``webhooks`` list).
        """
        bundle = base64.b64encode((self.certs / "ca.crt").read_bytes()).decode()
        source = f"{NAMESPACE}/{CERTIFICATE}"
        injected = []
        for doc in self.applied:
            if doc["metadata"].get("annotations", {}).get(INJECT_CA_FROM) != source:
                continue
            name = doc["metadata"]["name"]
            if doc["kind"] == "CustomResourceDefinition":
                path = f"{CRD_API}/{name}"
                fields = ["/spec/conversion/webhook/clientConfig/caBundle"]
            else:
                path = f"/apis/admissionregistration.k8s.io/v1/{doc['kind'].lower()}s/{name}"
                fields = [f"/webhooks/{i}/clientConfig/caBundle" for i in range(len(doc["webhooks"]))]
            operations = [{"op": "add", "path": field, "value": bundle} for field in fields]
            self.admin.request(
                "PATCH", path, query=[("fieldManager", CAINJECTOR)], body=operations, content_type=JSON_PATCH
            )
            injected.append(f"{doc['kind']} {name}")
        return injected

    def point_service_at(self, name: str, port: int, ready: bool = True) -> None:
        """An EndpointSlice of the webhook Service pointing at ``localhost:port``, named after the process.

        kube-apiserver's service resolver (``--enable-aggregator-routing``) takes the Service's
        EndpointSlices (label ``kubernetes.io/service-name``), the slice port named as the Service
        port, and dials ``https://<address>:<port>`` (Endpoints objects are not read). Validation
        refuses a loopback IP in an IPv4 slice ("may not be in the loopback range") and an
        FQDN slice wants two dotted segments (so not ``localhost``); ``127.0.0.1`` as an FQDN
        address passes both, and the resolver dials it as written. The port is the number the
        Service's ``targetPort`` would resolve to on a pod: the process's own.
        """
        service = find(self.applied, "Service", SERVICE)
        port_name = service["spec"]["ports"][0]["name"]
        body = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-{name}",
                "namespace": NAMESPACE,
                "labels": {
                    "kubernetes.io/service-name": SERVICE,
                    "endpointslice.kubernetes.io/managed-by": ENDPOINTS_MANAGER,
                },
            },
            "addressType": "FQDN",
            "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ENDPOINT_HOST], "conditions": {"ready": ready}}],
        }
        self.admin.request(
            "PATCH",
            f"{SLICES}/{SERVICE}-{name}",
            query=[("fieldManager", ENDPOINTS_MANAGER), ("force", "true")],
            body=body,
            content_type="application/apply-patch+yaml",
        )

    def remove_endpoint(self, name: str) -> None:
        with contextlib.suppress(NotFound):
            self.admin.request("DELETE", f"{SLICES}/{SERVICE}-{name}")

    # ---- our processes -----------------------------------------------------------------------

    def server(self, name: str = "server", endpoint: bool = True, args: Sequence[str] = ()) -> ServerProcess:
        """A ``catalog-warden serve`` process as the server ServiceAccount (not started).

        ``endpoint``: listed in the Service's endpoints, so kube-apiserver sends it admission and
        conversion requests. Stopped when the session ends.
        """
        port, probe = free_port(), free_port()
        argv = [
            "serve", "--cert-dir", str(self.certs), "--host", "127.0.0.1", "--port", str(port),
            "--probe-host", "127.0.0.1", "--probe-port", str(probe),
            "--kubeconfig", str(self.service_account(NAMESPACE, SERVER_ACCOUNT)), "--config", str(self.config),
            *args,
        ]  # fmt: skip
        process = ServerProcess(
            name=name,
            argv=argv,
            probe_url=f"http://127.0.0.1:{probe}",
            log=self.workdir / "logs" / f"{name}.log",
            port=port,
            probe_port=probe,
        )
        self.processes.append(process)
        if endpoint:
            self.point_service_at(name, port)
        return process

    def sidecar(self, name: str = "sidecar", config: Path | None = None, args: Sequence[str] = ()) -> SidecarProcess:
        """A ``catalog-warden sidecar`` process as the sidecar ServiceAccount (not started).

        ``config`` defaults to the shipped one; its Lease lives in the catalog-warden namespace.
        """
        events = free_port()
        argv = [
            "sidecar", "--kubeconfig", str(self.service_account(NAMESPACE, SIDECAR_ACCOUNT)),
            "--config", str(config or self.config), "--events-port", str(events),
            "--identity", name, "--namespace", NAMESPACE, *args,
        ]  # fmt: skip
        process = SidecarProcess(
            name=name,
            argv=argv,
            probe_url=f"http://127.0.0.1:{events}",
            log=self.workdir / "logs" / f"{name}.log",
            events_port=events,
        )
        self.processes.append(process)
        return process

    def webhook_answers(self) -> str:
        """``""`` once kube-apiserver reaches our validating webhook through the Service; else why not.

        A dry-run create of a HelmClusterAddonRepository as admin: the charts webhook (no
        namespaceSelector) must be called and allow it.
        """
        body = {
            "apiVersion": "helm.deckhouse.io/v1alpha1",
            "kind": "HelmClusterAddonRepository",
            "metadata": {"name": "webhook-reachability-probe"},
            "spec": {"url": "oci://registry.example.com/charts/probe"},
        }
        try:
            self.admin.request(
                "POST",
                "/apis/helm.deckhouse.io/v1alpha1/helmclusteraddonrepositories",
                query=[("dryRun", "All")],
                body=body,
            )
        except ApiError as exc:
            return f"{exc.status} {exc.reason}: {exc.message}"
        return ""

    def wait_webhook(self, timeout: float = READY_TIMEOUT) -> None:
        last = [""]

        def answered() -> bool:
            last[0] = self.webhook_answers()
            return not last[0]

        try:
            wait_for(answered, "kube-apiserver to reach the webhook through the Service", timeout)
        except AssertionError as exc:
            raise ClusterError(f"{exc}; last answer: {last[0]}") from None

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


def install(plane: ControlPlane, workdir: Path) -> Cluster:
    """Apply the shipped manifests to ``plane`` and do cert-manager's part; nothing of ours runs yet."""
    rendered = render()
    applied = [doc for doc in rendered if group_of(doc) not in NOT_INSTALLED_GROUPS]
    certificate = find(rendered, "Certificate", CERTIFICATE)
    certs = workdir / "webhook-certs"
    write_dev_certs(certs, list(certificate["spec"]["dnsNames"]))
    config = workdir / "config"
    config.mkdir(exist_ok=True)
    for key, text in find(rendered, "ConfigMap", CONFIG_MAP)["data"].items():
        (config / key).write_text(text)
    (workdir / "logs").mkdir(exist_ok=True)
    cluster = Cluster(
        plane=plane,
        workdir=workdir,
        rendered=rendered,
        applied=applied,
        certs=certs,
        admin=Kube(build_api_client(plane.kubeconfig)),
        config=config,
    )
    cluster.apply(applied)
    for name in cluster.crd_names():
        wait_for(lambda name=name: cluster.established(name), f"CRD {name} to be Established")
    cluster.inject_ca_bundle()
    return cluster


@contextlib.contextmanager
def installed(workdir: Path | None = None) -> Iterator[Cluster]:
    """The control plane, the shipped manifests, and one ready server behind the Service.

    Yields once the server's ``/readyz`` is 200 (its cache synced with its own ServiceAccount's
    RBAC) and kube-apiserver reaches its webhooks through the Service.
    """
    owned = workdir is None
    workdir = workdir or Path(tempfile.mkdtemp(prefix="catalog-warden-cluster-"))
    with control_plane(workdir / "controlplane") as plane:
        cluster = install(plane, workdir)
        try:
            cluster.server().start()
            cluster.wait_webhook()
            yield cluster
        finally:
            cluster.stop()
    if owned:
        shutil.rmtree(workdir, ignore_errors=True)


__all__ = [
    "Cluster",
    "ClusterError",
    "ControlPlaneError",
    "ServerProcess",
    "SidecarProcess",
    "WardenProcess",
    "installed",
    "missing_prerequisite",
]
