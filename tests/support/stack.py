"""The whole admission path in one process: apiserver double -> our webhook server -> informer cache.

What a cluster does, with nothing faked on our side of the wire:

- a development CA and serving certificate (``webhook.certs``, what cert-manager issues);
- an :class:`ApiServerDouble` over the project's real ``manifests/`` (CRDs and webhook
  configurations), calling ``webhook_base_url`` + each webhook's path over TLS verified against
  the test CA, exactly as kube-apiserver uses the injected caBundle;
- an :class:`InformerCache` listing and watching the double as the warden's service account;
- the real webhook server (:class:`ServerThread`) deciding from that cache.

Tests act through the official ``kubernetes`` client as any user (:meth:`Stack.custom`) and read
what the user would see. The cache follows the double by watch, so a test that writes state and
then relies on a rule seeing it must first wait for the cache (:meth:`Stack.wait_cached`, or
:meth:`Stack.wait_caught_up` with the written object): polling with a deadline, never sleeping.

The server is built before the cache exists (the double needs the server's URL, the cache needs
the double), so it reads through :class:`LateView`, which is pointed at the cache once it runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from kubernetes import client

from policies.config import PolicyConfig
from policies.model import GroupKind, Obj
from policies.view import View, staleness_of
from tests.support.apiserver.double import ApiServerDouble
from tests.support.apiserver.fixtures import PROJECT_MANIFESTS
from tests.support.server import Endpoint, ServerThread, make_certs, wait_until
from webhook.kube.cache import DEFAULT_KINDS, InformerCache
from webhook.kube.client import Kube

WARDEN = "system:serviceaccount:catalog-warden:catalog-warden"
"""The default warden identity (DESIGN.md section 4): the cache watches as this user."""

DEFAULT_TIMEOUT = 10.0
"""Seconds a wait may take before the test fails; generous, as a missed event is a bug, not a delay."""

WATCH_POOL_SPARE = 4
"""Connections beyond one per watched kind: relists and the odd request while every watch is open."""

Predicate = Callable[[Obj | None], bool]


def exists(obj: Obj | None) -> bool:
    return obj is not None


def gone(obj: Obj | None) -> bool:
    return obj is None


class LateView:
    """A :class:`View` whose backing view is set after construction; unsynced until then."""

    def __init__(self) -> None:
        self.target: View | None = None

    @property
    def synced(self) -> bool:
        return self.target is not None and self.target.synced

    def staleness(self) -> str:
        return staleness_of(self.target)

    def _view(self) -> View:
        if self.target is None:
            raise RuntimeError("LateView read before its view was set")
        return self.target

    def get(self, kind: GroupKind, name: str, namespace: str = "") -> Obj | None:
        return self._view().get(kind, name, namespace)

    def list(
        self, kind: GroupKind, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> Sequence[Obj]:
        return self._view().list(kind, namespace, labels)

    def indexed(self, kind: GroupKind, index: str, key: str) -> Sequence[Obj]:
        return self._view().indexed(kind, index, key)


STANDALONE = PolicyConfig(families={name: {"mode": "standalone"} for name in ("catalog", "packages", "charts")})
"""The configuration that matches the double: it serves our own CRDs for every group, so every
family runs standalone (DESIGN.md section 3); a test of the alongside answers passes its own."""


class Stack:
    """Certificates, apiserver double, informer cache and webhook server, started and stopped together.

    Use as a context manager. ``config`` is the server's :class:`PolicyConfig` (default
    :data:`STANDALONE`); the cache always runs as ``config.identities.warden``. ``manifests_dir``
    defaults to the project's ``manifests/``.
    """

    def __init__(
        self,
        config: PolicyConfig | None = None,
        manifests_dir: Path = PROJECT_MANIFESTS,
        work_dir: Path | None = None,
    ) -> None:
        self.config = config or STANDALONE
        self.manifests_dir = manifests_dir
        self._tmp = tempfile.TemporaryDirectory(prefix="stack-") if work_dir is None else None
        self.work_dir = Path(self._tmp.name) if self._tmp is not None else work_dir
        self._clients: dict[tuple[str, tuple[str, ...]], client.ApiClient] = {}
        self._owned: list[client.ApiClient] = []
        self.view = LateView()
        self.server: ServerThread | None = None
        self.double: ApiServerDouble | None = None
        self.cache: InformerCache | None = None
        self.endpoint: Endpoint | None = None

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Stack:
        try:
            cert_dir = make_certs(self.work_dir / "certs")
            self.server = ServerThread(cert_dir, view=self.view, config=self.config)
            self.double = ApiServerDouble(
                self.manifests_dir,
                webhook_base_url=self.server.endpoint.url,
                ca_bundle=(cert_dir / "ca.crt").read_bytes(),
            ).start()
            self.cache = InformerCache(Kube(self._warden_client())).start()
            if not self.cache.wait_synced(DEFAULT_TIMEOUT):
                raise AssertionError(f"informer cache not synced after {DEFAULT_TIMEOUT}s")
            self.view.target = self.cache
            self.endpoint = self.server.__enter__()
        except BaseException:
            self.stop()
            raise
        return self

    def _warden_client(self) -> client.ApiClient:
        """The cache's client, with a connection pool that holds one watch per kind plus lists.

        The client's default pool (10) is smaller than the number of kinds watched, so urllib3
        would discard and reopen connections ("Connection pool is full").
        """
        configuration = self.apiserver.configuration(self.config.identities.warden)
        configuration.connection_pool_maxsize = len(DEFAULT_KINDS) + WATCH_POOL_SPARE
        api_client = client.ApiClient(configuration)
        self._owned.append(api_client)
        return api_client

    def stop(self) -> None:
        """Stop in reverse order; safe after a partial start."""
        if self.server is not None and self.server.thread.is_alive():
            self.server.__exit__(None, None, None)
        self.endpoint = None
        if self.cache is not None:
            self.cache.stop()
            self.cache = None
        for api_client in self._owned:
            api_client.close()
        self._owned.clear()
        if self.double is not None:
            self.double.stop()
            self.double = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---- clients -------------------------------------------------------------------------------

    @property
    def apiserver(self) -> ApiServerDouble:
        assert self.double is not None, "start() the stack first"
        return self.double

    def api_client(self, user: str, groups: Sequence[str] = ()) -> client.ApiClient:
        """The official client authenticated as ``user`` (one per user and groups, reused)."""
        key = (user, tuple(groups))
        if key not in self._clients:
            self._clients[key] = self.apiserver.api_client(user, groups)
        return self._clients[key]

    def custom(self, user: str, groups: Sequence[str] = ()) -> client.CustomObjectsApi:
        """``CustomObjectsApi`` acting as ``user``: every request reaches the webhooks as that user."""
        return client.CustomObjectsApi(self.api_client(user, groups))

    def core(self, user: str, groups: Sequence[str] = ()) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client(user, groups))

    @property
    def admin(self) -> client.ApiClient:
        return self.apiserver.admin

    # ---- waiting for the cache -----------------------------------------------------------------

    def cached(self, kind: GroupKind, name: str, namespace: str = "") -> Obj | None:
        assert self.cache is not None, "start() the stack first"
        return self.cache.get(kind, name, namespace)

    def wait_cached(
        self,
        kind: GroupKind,
        name: str,
        namespace: str = "",
        predicate: Predicate = exists,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Obj | None:
        """Poll the cache until ``predicate(cached object or None)`` holds; return what it saw.

        Fails with the last cached state after ``timeout`` seconds.
        """
        seen: list[Obj | None] = [None]

        def check() -> bool:
            seen[0] = self.cached(kind, name, namespace)
            return predicate(seen[0])

        where = f"{namespace}/{name}" if namespace else name
        try:
            wait_until(check, timeout, what=f"{kind.kind} {where} in the cache")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last cached: {seen[0]!r}") from None
        return seen[0]

    def wait_caught_up(self, kind: GroupKind, written: Obj, timeout: float = DEFAULT_TIMEOUT) -> Obj:
        """Wait until the cache holds ``written`` (an apiserver answer) or a later version of it."""
        metadata = written["metadata"]
        version = int(metadata["resourceVersion"])

        def fresh(obj: Obj | None) -> bool:
            return obj is not None and int(obj["metadata"]["resourceVersion"]) >= version

        found = self.wait_cached(kind, metadata["name"], metadata.get("namespace", ""), fresh, timeout)
        assert found is not None
        return found

    def wait_uncached(self, kind: GroupKind, name: str, namespace: str = "", timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until the cache no longer holds the object (its DELETED event arrived)."""
        self.wait_cached(kind, name, namespace, gone, timeout)


def warnings_of(headers: Mapping[str, Any] | Any) -> list[str]:
    """The texts of the ``Warning: 299 - "..."`` headers of a ``*_with_http_info`` answer."""
    values: list[str] = []
    getlist = getattr(headers, "getlist", None)
    raw = getlist("Warning") if getlist else [v for k, v in dict(headers).items() if k.lower() == "warning"]
    for value in raw:
        text = value.split(" ", 2)[2] if value.startswith("299 ") else value
        values.append(text[1:-1] if text.startswith('"') and text.endswith('"') else text)
    return values
