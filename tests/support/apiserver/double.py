"""`ApiServerDouble`: the public entry point. Start it, hand its clients to the code under test.

Identity: each `api_client(user, groups)` gets its own bearer token, which the double maps to that
user (as a kube-apiserver token authenticator does), so every request, and every AdmissionReview it
causes, carries the user the test chose. Service-account users get the groups the real authenticator
adds (`system:serviceaccounts`, `system:serviceaccounts:<ns>`); everyone gets `system:authenticated`.
There is no authorization: every authenticated user may do everything (RBAC is not the project's to test).
"""

from __future__ import annotations

import datetime
import secrets
import ssl
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from kubernetes import client

from tests.support.apiserver.admission import Admission
from tests.support.apiserver.controllers import Controllers, service_account_user
from tests.support.apiserver.conversion import WebhookConverter
from tests.support.apiserver.operations import Api, Target
from tests.support.apiserver.pki import TestCA
from tests.support.apiserver.resources import NAMESPACES, Registry, yaml_documents
from tests.support.apiserver.server import DoubleHTTPServer, Request
from tests.support.apiserver.store import Store
from tests.support.apiserver.webhooks import load_webhooks

ADMIN_USER = "kubernetes-admin"
ADMIN_GROUPS = ("system:masters",)
INITIAL_NAMESPACES = ("default", "kube-system")


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class ApiServerDouble:
    """A kube-apiserver stand-in serving `manifests_dir`'s CRDs and calling its webhooks.

    `webhook_base_url` replaces every `service` clientConfig (webhooks and CRD conversion) with
    `webhook_base_url + path`; `ca_bundle` is what cert-manager's `inject-ca-from` would inject.
    With `tls=True` the double itself serves HTTPS with its own throwaway CA (clients are configured).
    """

    def __init__(
        self,
        manifests_dir: Path,
        *,
        webhook_base_url: str | None = None,
        ca_bundle: bytes | None = None,
        tls: bool = False,
        bookmark_interval: float = 1.0,
        clock: Callable[[], datetime.datetime] = _utc_now,
    ) -> None:
        self.manifests_dir = Path(manifests_dir)
        self.webhook_base_url = webhook_base_url
        self.ca_bundle = ca_bundle
        self.tls = tls
        documents = list(yaml_documents(self.manifests_dir))
        self.registry = Registry.from_manifests(self.manifests_dir)
        self.store = Store()
        self._stopping = threading.Event()
        self.converter = WebhookConverter(webhook_base_url, ca_bundle)
        self.admission = Admission(
            load_webhooks(documents, webhook_base_url), ca_bundle, self.converter, self._ns_labels
        )
        self.api = Api(
            self.registry, self.store, self.admission, self.converter, clock, bookmark_interval, self._stopping
        )
        self.controllers = Controllers(self.api, self._stopping)
        self._tokens: dict[str, dict[str, Any]] = {}
        self._server: DoubleHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="apiserver-double-")
        self._ca_file: str | None = None
        self._clients: list[client.ApiClient] = []
        self._admin: client.ApiClient | None = None

    def _ns_labels(self, namespace: str) -> dict[str, str] | None:
        return self.api.namespace_labels(namespace)

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ApiServerDouble:
        server = DoubleHTTPServer(("127.0.0.1", 0), self.api, self._tokens)
        if self.tls:
            ca = TestCA("apiserver-double CA")
            cert_path, key_path = ca.issue().write(Path(self._tmp.name))
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert_path, key_path)
            server.socket = context.wrap_socket(server.socket, server_side=True)
            ca_path = Path(self._tmp.name) / "ca.crt"
            ca_path.write_bytes(ca.cert_pem)
            self._ca_file = str(ca_path)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="apiserver-double", daemon=True
        )
        self._thread.start()
        for name in INITIAL_NAMESPACES:
            self.api.seed(Target(NAMESPACES, "v1"), {"metadata": {"name": name}})
        self.controllers.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self.store.changed:
            self.store.changed.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self.controllers.join()
        for api_client in self._clients:
            api_client.close()
        self._tmp.cleanup()

    def __enter__(self) -> ApiServerDouble:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the double first"
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    # ---- clients -------------------------------------------------------------------------------

    def configuration(self, user: str, groups: Sequence[str] = ()) -> client.Configuration:
        """A client Configuration authenticating as `user` (a fresh bearer token mapped to that user)."""
        token = secrets.token_urlsafe(24)
        self._tokens[token] = service_account_user(user, tuple(groups))
        configuration = client.Configuration(host=self.url)
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        if self._ca_file:
            configuration.ssl_ca_cert = self._ca_file
        return configuration

    def api_client(self, user: str, groups: Sequence[str] = ()) -> client.ApiClient:
        api_client = client.ApiClient(self.configuration(user, groups))
        self._clients.append(api_client)
        return api_client

    @property
    def admin(self) -> client.ApiClient:
        """A cluster-admin client (`kubernetes-admin`, group `system:masters`)."""
        if self._admin is None:
            self._admin = self.api_client(ADMIN_USER, ADMIN_GROUPS)
        return self._admin

    # ---- test controls -------------------------------------------------------------------------

    def compact(self, keep: int = 0) -> None:
        """Forget all but the last `keep` events now: watches from older resourceVersions get 410."""
        self.store.compact(keep)

    def set_watch_window(self, size: int) -> None:
        """Retain only the last `size` events from now on (default 100,000)."""
        self.store.set_window(size)

    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` (apiVersion, kind, metadata.name[, namespace]) without admission, as pre-existing state."""
        group, _, version = obj["apiVersion"].rpartition("/")
        resource = self.registry.by_kind(group, obj["kind"])
        if resource is None or version not in resource.versions:
            raise ValueError(f"{obj['apiVersion']} {obj['kind']} is not served by this double")
        namespace = obj["metadata"].get("namespace", "") if resource.namespaced else ""
        return self.api.seed(Target(resource, version, namespace), obj)

    @property
    def resource_version(self) -> int:
        return self.store.resource_version

    @property
    def webhook_calls(self) -> list[tuple[str, dict[str, Any]]]:
        """(webhook name, AdmissionReview request) for every call made, in order."""
        return self.admission.calls

    @property
    def requests(self) -> list[Request]:
        """Every authenticated HTTP request (method, path, query parameters, user), in arrival order."""
        return self._server.requests if self._server is not None else []

    @property
    def failures(self) -> list[str]:
        """Unexpected exceptions inside the double (each also answered as a 500); tests may assert it is empty."""
        return self._server.failures if self._server is not None else []
