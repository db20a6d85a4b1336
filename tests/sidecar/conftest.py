"""Fixtures for the sidecar tests: a real docker-registry, the apiserver double, an informer cache,
registry clients that count what they send, and a small world builder for catalog objects."""

from __future__ import annotations

import base64
import functools
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from policies.kinds import COMPONENT, COMPONENT_VERSION, NAMESPACE, REGISTRY, SECRET
from policies.objects import ref_of
from tests.support.apiserver import ApiServerDouble
from tests.support.apiserver.fixtures import apiserver  # noqa: F401  (the double, webhooks cleared)
from tests.support.apiserver.server import Handler
from tests.support.registry import RegistryServer
from tests.support.server import wait_until
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube, NotFound
from webhook.registry.client import RegistryClient
from webhook.sidecar.clients import Endpoint, RegistryClients

NS = "team-a"
WARDEN_NS = "catalog-warden"
WARDEN = "system:serviceaccount:catalog-warden:catalog-warden"
SOLAR = "solar.opendefense.cloud/v1alpha1"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WRITES = ("create", "update", "patch", "delete")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_nagle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The double answers headers and body in two writes; without this each request costs ~40 ms."""
    monkeypatch.setattr(Handler, "disable_nagle_algorithm", True)


# ---- the cluster ------------------------------------------------------------------------------


@dataclass
class Writes:
    """Every write verb the double served: (verb, plural, namespace/name, subresource)."""

    calls: list[tuple[str, str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, plural: str | None = None, verb: str | None = None) -> list[tuple[str, str, str, str]]:
        with self.lock:
            return [c for c in self.calls if (plural is None or c[1] == plural) and (verb is None or c[0] == verb)]

    def clear(self) -> None:
        with self.lock:
            self.calls.clear()


@pytest.fixture
def writes(apiserver: ApiServerDouble) -> Writes:  # noqa: F811
    recorder = Writes()
    api = apiserver.api
    for verb in WRITES:
        original = getattr(api, verb)

        @functools.wraps(original)
        def wrapper(target: Any, *args: Any, _verb: str = verb, _original: Callable[..., Any] = original) -> Any:
            where = f"{target.namespace}/{target.name}" if target.namespace else target.name
            with recorder.lock:
                recorder.calls.append((_verb, target.resource.plural, where, target.sub))
            return _original(target, *args)

        setattr(api, verb, wrapper)
    return recorder


@pytest.fixture
def admin(apiserver: ApiServerDouble) -> Kube:  # noqa: F811
    """The test's own hands (a cluster admin); its writes happen before `writes` is cleared."""
    k = Kube(apiserver.admin)
    for ns in (NS, WARDEN_NS):
        k.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return k


@pytest.fixture
def kube(apiserver: ApiServerDouble, admin: Kube) -> Kube:  # noqa: F811
    """The sidecar's connection (the warden's service account)."""
    return Kube(apiserver.api_client(WARDEN))


@pytest.fixture
def cache(kube: Kube) -> Iterator[InformerCache]:
    c = InformerCache(kube, (COMPONENT, COMPONENT_VERSION, REGISTRY)).start()
    assert c.wait_synced(10), "informer cache did not sync"
    yield c
    c.stop()


# ---- registries -------------------------------------------------------------------------------


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[RegistryServer]:
    with RegistryServer(tmp_path / "registry") as server:
        yield server


Hook = Callable[[httpx.Request, httpx.Response], Awaitable[None] | None]


class Counting(httpx.AsyncBaseTransport):
    """Counts every request the sidecar's registry clients send; ``after`` runs after each answer
    (a test uses it to stop the registry between two lookups) and ``rewrite`` may replace an answer."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.requests: list[tuple[str, str]] = []
        self.after: Hook | None = None
        self.rewrite: Callable[[httpx.Request], httpx.Response | None] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        forced = self.rewrite(request) if self.rewrite else None
        response = forced or await self._inner.handle_async_request(request)
        if self.after is not None:
            await response.aread()
            result = self.after(request, response)
            if result is not None:
                await result
        return response

    def of(self, method: str) -> list[str]:
        return [path for m, path in self.requests if m == method]

    def clear(self) -> None:
        self.requests.clear()

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
def counting() -> Counting:
    return Counting()


def counting_factory(transport: Counting) -> Callable[[Endpoint], RegistryClient]:
    def factory(endpoint: Endpoint) -> RegistryClient:
        return RegistryClient(
            endpoint.hostname, plain_http=endpoint.plain_http, credentials=endpoint.credentials, transport=transport
        )

    return factory


def secret_reader(kube: Kube) -> Callable[[str, str], dict[str, Any] | None]:
    def read(namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return kube.get(SECRET, name, namespace)
        except NotFound:
            return None

    return read


@pytest.fixture
def clients(cache: InformerCache, kube: Kube, counting: Counting) -> RegistryClients:
    return RegistryClients(cache, secret_reader(kube), counting_factory(counting))


# ---- catalog objects --------------------------------------------------------------------------


@dataclass
class World:
    """Creates catalog objects as an admin would, and waits for the sidecar's cache to see them."""

    admin: Kube
    cache: InformerCache

    def component(self, name: str, registry: str, repository: str, scheme: str = "http") -> dict[str, Any]:
        spec = {"registry": registry, "repository": repository, "scheme": scheme}
        return self._create(COMPONENT, name, {"spec": spec})

    def version(self, name: str, component: str, tag: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        body = {"spec": {"componentRef": {"name": component}, "tag": tag}, "metadata": {"labels": labels or {}}}
        return self._create(COMPONENT_VERSION, name, body)

    def registry(
        self, name: str, hostname: str, secret: str = "", annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"hostname": hostname, "plainHTTP": True}
        if secret:
            spec["solarSecretRef"] = {"name": secret}
        return self._create(REGISTRY, name, {"spec": spec, "metadata": {"annotations": annotations or {}}})

    def secret(self, name: str, username: str, password: str, namespace: str = NS) -> None:
        data = {k: base64.b64encode(v.encode()).decode() for k, v in (("username", username), ("password", password))}
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "data": data}
        self.admin.create(SECRET, body)

    def _create(self, kind: Any, name: str, extra: dict[str, Any]) -> dict[str, Any]:
        metadata = {"name": name, "namespace": NS, **extra.pop("metadata", {})}
        body = {"apiVersion": SOLAR, "kind": kind.kind, "metadata": metadata, **extra}
        return self.admin.create(kind, body)

    def get(self, name: str) -> dict[str, Any]:
        return self.admin.get(COMPONENT_VERSION, name, NS)

    def patch_status(self, name: str, status: dict[str, Any]) -> None:
        self.admin.patch(COMPONENT_VERSION, name, NS, {"status": status})

    def delete(self, kind: Any, name: str) -> None:
        self.admin.delete(kind, name, NS)

    def settle(self) -> None:
        """Wait until the cache holds exactly what the apiserver holds (same resourceVersions)."""

        def same() -> bool:
            for kind in (COMPONENT, COMPONENT_VERSION, REGISTRY):
                api = {ref_of(o): o["metadata"]["resourceVersion"] for o in self.admin.list(kind)["items"]}
                mine = {ref_of(o): o["metadata"]["resourceVersion"] for o in self.cache.list(kind)}
                if api != mine:
                    return False
            return True

        wait_until(same, timeout=10, what="the informer cache to catch up with the apiserver")


@pytest.fixture
def world(admin: Kube, cache: InformerCache) -> World:
    return World(admin, cache)
