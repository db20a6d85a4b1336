"""The sidecar with its informer cache cut off from the apiserver (a TCP proxy between them).

While the cache is stale no loop acts: an entry created during the cut is invisible to the cache,
so reclaiming from what the cache shows would delete that entry's artifact. The sidecar's
``/readyz`` names the stale kinds meanwhile; ``/healthz`` (liveness) stays 200, since a restart
cannot bring the apiserver back, and turns 503 only if an informer thread has ended.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from kubernetes import client

from policies.config import PolicyConfig
from policies.kinds import COMPONENT, COMPONENT_VERSION, REGISTRY
from policies.reclaim import RECLAIM_ANNOTATION
from policies.sidecar_config import SidecarConfig
from tests.kube.tcp_proxy import TcpProxy
from tests.sidecar.conftest import T0, WARDEN, WARDEN_NS, Counting, World, Writes, counting_factory
from tests.support.apiserver import ApiServerDouble
from tests.support.registry import RegistryServer, push_ocm_component
from tests.support.server import wait_until
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube
from webhook.sidecar.runner import Sidecar, SidecarSettings

pytestmark = pytest.mark.anyio

DEMO_REPO = "ocm/component-descriptors/example.com/demo"
KINDS = (COMPONENT, COMPONENT_VERSION, REGISTRY)


@pytest.fixture
def proxy(apiserver: ApiServerDouble) -> Iterator[TcpProxy]:
    host, port = apiserver.url.removeprefix("http://").split(":")
    with TcpProxy((host, int(port))) as p:
        yield p


@pytest.fixture
def proxied_cache(apiserver: ApiServerDouble, admin: Kube, proxy: TcpProxy) -> Iterator[InformerCache]:
    configuration = apiserver.configuration(WARDEN)
    configuration.host = proxy.url
    cache = InformerCache(
        Kube(client.ApiClient(configuration)),
        KINDS,
        watch_timeout=2,
        max_watch_gap=0.5,
        request_timeout=0.5,
        backoff=(0.05, 0.2),
    ).start()
    assert cache.wait_synced(10)
    yield cache
    cache.stop()


def client_for(sidecar: Sidecar) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=sidecar.server.config.app), base_url="http://sidecar")


async def test_a_stale_cache_reclaims_nothing_and_readiness_says_why(
    registry: RegistryServer,
    admin: Kube,
    kube: Kube,
    proxy: TcpProxy,
    proxied_cache: InformerCache,
    counting: Counting,
    writes: Writes,
) -> None:
    world = World(admin, proxied_cache)
    with registry.http() as http:
        pushed = {
            version: push_ocm_component(http, "ocm", "example.com/demo", version, version.encode())
            for version in ("0.9.0", "1.0.0", "2.0.0")
        }
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo")
    world.version("one", "example-com-demo", "1.0.0")
    world.registry("reg", registry.hostname, annotations={RECLAIM_ANNOTATION: "distribution-delete"})
    world.settle()
    config = SidecarConfig.model_validate(
        {"referencedSet": {"namespace": WARDEN_NS}, "reclaim": {"safetyAge": "0s"}, "packages": {"enabled": False}}
    )
    sidecar = Sidecar(
        kube,
        PolicyConfig(sidecar=config),
        SidecarSettings(namespace=WARDEN_NS, identity="pod-a"),
        cache=proxied_cache,
        client_factory=counting_factory(counting),
    )
    sidecar._started_leading()

    proxy.cut(reset=True)
    wait_until(lambda: all(k.stale for k in proxied_cache.liveness()), what="every cut kind counted stale")
    assert not proxied_cache.synced
    world.version("two", "example-com-demo", "2.0.0")  # created during the cut: the cache cannot know it
    writes.clear()
    await sidecar.pass_once(T0)
    assert counting.requests == [], "no loop may touch a registry while the cache is stale"
    assert writes.of() == []
    async with client_for(sidecar) as http:
        ready, health = await http.get("/readyz"), await http.get("/healthz")
    assert ready.status_code == 503
    assert ready.text.startswith("cluster state stale: "), ready.text
    for kind in KINDS:
        assert f"{kind} watch down since " in ready.text
    assert (health.status_code, health.text) == (200, "ok")

    proxy.heal()
    wait_until(
        lambda: proxied_cache.synced and proxied_cache.get(COMPONENT_VERSION, "two", "team-a") is not None,
        what="the cache relisted by itself",
    )
    await sidecar.pass_once(T0 + timedelta(minutes=5))
    removed = [p for m, p in counting.requests if m == "DELETE"]
    assert removed == [f"/v2/{DEMO_REPO}/manifests/{pushed['0.9.0'].digest}"], "live again: only the orphan goes"
    with registry.http() as http:
        assert sorted(http.get(f"/v2/{DEMO_REPO}/tags/list").json()["tags"]) == ["1.0.0", "2.0.0"]
    async with client_for(sidecar) as http:
        assert (await http.get("/readyz")).text == "ok"
    await sidecar.clients.aclose()


async def test_healthz_fails_only_when_an_informer_thread_has_ended(
    kube: Kube, proxied_cache: InformerCache, counting: Counting
) -> None:
    sidecar = Sidecar(
        kube,
        PolicyConfig(sidecar=SidecarConfig.model_validate({"packages": {"enabled": False}})),
        SidecarSettings(namespace=WARDEN_NS, identity="pod-a"),
        cache=proxied_cache,
        client_factory=counting_factory(counting),
    )
    async with client_for(sidecar) as http:
        assert ((await http.get("/healthz")).status_code, (await http.get("/readyz")).status_code) == (200, 200)
        ended = threading.Thread(target=lambda: None)  # what a reflector that let an error escape would leave
        ended.start()
        ended.join()
        proxied_cache._reflectors[COMPONENT_VERSION].thread = ended
        health = await http.get("/healthz")
    assert (health.status_code, health.text) == (503, f"informer threads ended: {COMPONENT_VERSION}")
    await sidecar.clients.aclose()
