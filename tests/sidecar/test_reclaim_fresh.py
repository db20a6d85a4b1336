"""Reclamation decided on fresh truth: entries are read from the apiserver, not from the cache.

A cache whose watch was cut keeps serving what it last saw (issue 11: "reclamation deleted the
artifact of a ComponentVersion created after the cut"). The cut is forced, never timed: the
loops are handed a view frozen from the cache, and the entry is then created through the API,
so the view cannot show it while the apiserver does.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from kubernetes import client

from policies.families import INDEXES
from policies.kinds import COMPONENT, COMPONENT_VERSION, CONFIG_MAP, REGISTRY
from policies.model import GroupKind
from policies.reclaim import RECLAIM_ANNOTATION, REFUSED_INCOMPLETE
from policies.referenced_set import CONFIGMAP_KEY, MSG_UNSYNCED
from policies.sidecar_config import ReclaimConfig, ReferencedSetConfig
from policies.view import MemoryView
from tests.kube.tcp_proxy import TcpProxy
from tests.sidecar.conftest import NS, T0, WARDEN, WARDEN_NS, Counting, World, counting_factory, secret_reader
from tests.support.apiserver import ApiServerDouble
from tests.support.registry import Pushed, RegistryServer, push_ocm_component
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube, Unreachable
from webhook.sidecar.clients import RegistryClients
from webhook.sidecar.reclaim import MSG_NOT_LIVE, Reclaimer
from webhook.sidecar.referenced_set import MSG_FRESH_LIST_FAILED, Publication, ReferencedSetPublisher

pytestmark = pytest.mark.anyio

DEMO_REPO = "ocm/component-descriptors/example.com/demo"
CONFIG_NAME = "catalog-warden-referenced-set"


@pytest.fixture
def pushed(registry: RegistryServer, world: World) -> dict[str, Pushed]:
    return push_demo(registry, world)


def push_demo(registry: RegistryServer, world: World) -> dict[str, Pushed]:
    """demo 1.0.0 is kept by an entry; 0.9.0 and 0.8.0 are old artifacts no entry keeps yet."""
    with registry.http() as http:
        artifacts = {
            version: push_ocm_component(http, "ocm", "example.com/demo", version, version.encode())
            for version in ("1.0.0", "0.9.0", "0.8.0")
        }
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo")
    world.version("current", "example-com-demo", "1.0.0")
    world.registry("reg", registry.hostname, annotations={RECLAIM_ANNOTATION: "distribution-delete"})
    world.settle()
    return artifacts


def frozen(cache: InformerCache) -> MemoryView:
    """What a cache whose watches were cut keeps serving: its last content, still "synced"."""
    view = MemoryView(INDEXES, synced=True)
    for kind in (COMPONENT, COMPONENT_VERSION, REGISTRY):
        for obj in cache.list(kind):
            view.put(kind, obj)
    return view


def loops(view: MemoryView, kube: Kube, counting: Counting) -> tuple[ReferencedSetPublisher, Reclaimer]:
    publisher = ReferencedSetPublisher(view, kube, ReferencedSetConfig(namespace=WARDEN_NS))
    clients = RegistryClients(view, secret_reader(kube), counting_factory(counting))
    config = ReclaimConfig(safetyAge="0s", maxRemovalShare=1.0)
    return publisher, Reclaimer(view, clients, config, fresh=publisher.fresh)


def tags(registry: RegistryServer) -> list[str]:
    with registry.http() as http:
        return sorted(http.get(f"/v2/{DEMO_REPO}/tags/list").json()["tags"])


async def test_an_entry_created_during_the_cut_is_published_and_keeps_its_artifact(
    registry: RegistryServer, pushed: dict[str, Pushed], world: World, cache: InformerCache, kube: Kube
) -> None:
    counting = Counting()
    view = frozen(cache)
    world.version("created-during-the-cut", "example-com-demo", "0.9.0")
    assert view.get(COMPONENT_VERSION, "created-during-the-cut", NS) is None, "the frozen view must not see it"
    publisher, reclaim = loops(view, kube, counting)

    result = await publisher.publish(T0)
    assert result.result is Publication.PUBLISHED
    doc = json.loads(kube.get(CONFIG_MAP, CONFIG_NAME, WARDEN_NS)["data"][CONFIGMAP_KEY])
    assert doc["registries"][registry.hostname][DEMO_REPO]["tags"] == ["0.9.0", "1.0.0"]

    reports = await reclaim.run_once(result.reclaimable, T0)
    assert [(r.refused, r.removed) for r in reports] == [("", [f"{DEMO_REPO}@{pushed['0.8.0'].digest}"])]
    assert tags(registry) == ["0.9.0", "1.0.0"]
    await reclaim.clients.aclose()


async def test_an_entry_created_while_the_registry_is_listed_keeps_its_artifact_on_a_frozen_cache(
    registry: RegistryServer, pushed: dict[str, Pushed], world: World, cache: InformerCache, kube: Kube
) -> None:
    """The set is recomputed after the listing from a fresh list: the frozen cache never shows the entry."""
    counting = Counting()
    view = frozen(cache)
    publisher, reclaim = loops(view, kube, counting)
    result = await publisher.publish(T0)

    def discovery_creates_an_entry(request: httpx.Request, response: httpx.Response) -> None:
        if request.url.path == "/v2/_catalog":
            world.version("created-while-listing", "example-com-demo", "0.8.0")

    counting.after = discovery_creates_an_entry
    reports = await reclaim.run_once(result.reclaimable, T0)
    assert view.get(COMPONENT_VERSION, "created-while-listing", NS) is None
    assert [(r.refused, r.removed) for r in reports] == [("", [f"{DEMO_REPO}@{pushed['0.9.0'].digest}"])]
    assert tags(registry) == ["0.8.0", "1.0.0"]
    await reclaim.clients.aclose()


def failing_list(kube: Kube, error: Exception, kinds: tuple[GroupKind, ...]) -> Any:
    real = kube.list

    def list_(kind: GroupKind, *args: Any, **kwargs: Any) -> Any:
        if kind in kinds:
            raise error
        return real(kind, *args, **kwargs)

    return list_


ERRORS = [
    pytest.param(
        Unreachable(0, "Unreachable", "connection reset"), "Unreachable: 0 Unreachable: connection reset", id="typed"
    ),
    pytest.param(
        ConnectionResetError("Response ended prematurely"), "ConnectionResetError: Response ended prematurely", id="raw"
    ),
]


@pytest.mark.parametrize(("error", "shown"), ERRORS)
async def test_a_failed_fresh_list_publishes_nothing(
    registry: RegistryServer,
    pushed: dict[str, Pushed],
    cache: InformerCache,
    kube: Kube,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    shown: str,
) -> None:
    publisher, reclaim = loops(frozen(cache), kube, Counting())
    monkeypatch.setattr(kube, "list", failing_list(kube, error, (COMPONENT_VERSION,)))
    result = await publisher.publish(T0)
    why = MSG_FRESH_LIST_FAILED.format(kind="ComponentVersions", error=shown)
    assert (result.result, result.referenced.reasons) == (Publication.INCOMPLETE, (why,))
    assert why == f"the fresh list of ComponentVersions failed ({shown}); the set would miss entries"
    await reclaim.clients.aclose()


@pytest.mark.parametrize(("error", "shown"), ERRORS)
async def test_a_failed_fresh_list_after_the_listing_reclaims_nothing(
    registry: RegistryServer,
    pushed: dict[str, Pushed],
    cache: InformerCache,
    kube: Kube,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    shown: str,
) -> None:
    counting = Counting()
    publisher, reclaim = loops(frozen(cache), kube, counting)
    result = await publisher.publish(T0)
    assert result.result is Publication.PUBLISHED
    monkeypatch.setattr(kube, "list", failing_list(kube, error, (COMPONENT,)))

    reports = await reclaim.run_once(result.reclaimable, T0)
    why = MSG_FRESH_LIST_FAILED.format(kind="Components", error=shown)
    assert [(r.refused, r.removed) for r in reports] == [(REFUSED_INCOMPLETE.format(summary=why), [])]
    assert counting.of("DELETE") == []
    assert tags(registry) == ["0.8.0", "0.9.0", "1.0.0"]
    await reclaim.clients.aclose()


async def test_a_cache_that_is_not_live_publishes_nothing_and_lists_nothing(
    registry: RegistryServer,
    pushed: dict[str, Pushed],
    cache: InformerCache,
    kube: Kube,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A watch that is down (the informer then reports not synced) holds everything, even with a fresh list at hand."""
    view = frozen(cache)
    view.mark_synced(False)
    publisher, reclaim = loops(view, kube, Counting())
    monkeypatch.setattr(kube, "list", failing_list(kube, AssertionError("listed"), (COMPONENT, COMPONENT_VERSION)))
    result = await publisher.publish(T0)
    assert (result.result, result.referenced.reasons) == (Publication.INCOMPLETE, (MSG_UNSYNCED,))
    await reclaim.clients.aclose()


async def test_a_cache_that_stops_being_live_mid_pass_sends_no_further_delete(
    registry: RegistryServer, pushed: dict[str, Pushed], cache: InformerCache, kube: Kube
) -> None:
    counting = Counting()
    view = frozen(cache)
    publisher, reclaim = loops(view, kube, counting)
    result = await publisher.publish(T0)

    def watch_goes_down(request: httpx.Request, response: httpx.Response) -> None:
        if request.method == "DELETE":
            view.mark_synced(False)

    counting.after = watch_goes_down
    (report,) = await reclaim.run_once(result.reclaimable, T0)
    assert (report.refused, report.removed) == (MSG_NOT_LIVE, [f"{DEMO_REPO}@{pushed['0.8.0'].digest}"])
    assert MSG_NOT_LIVE == "the cluster cache is no longer live (a watch is down); nothing more is removed"
    assert len(counting.of("DELETE")) == 1 and tags(registry) == ["0.9.0", "1.0.0"]
    await reclaim.clients.aclose()


async def test_a_cut_watch_connection_never_costs_an_entry_created_during_the_cut_its_artifact(
    registry: RegistryServer, apiserver: ApiServerDouble, admin: Kube, kube: Kube
) -> None:
    """The cache's connections go through a proxy that is then cut (connections reset, new ones
    hang); the entry is created afterwards, so the cache cannot have seen it. The loops read the
    apiserver over their own connection, as after an idle-connection cut or an apiserver restart.
    Whether the cache still calls itself synced (a watch thread that died) or not (an informer
    that notices the cut), the entry's artifact stays: kept by the fresh list, or nothing is reclaimed."""
    upstream = urlsplit(apiserver.url)
    proxy = TcpProxy((str(upstream.hostname), int(upstream.port or 80)))
    configuration = apiserver.configuration(WARDEN)
    configuration.host = proxy.url
    cache = InformerCache(Kube(client.ApiClient(configuration)), (COMPONENT, COMPONENT_VERSION, REGISTRY))
    counting = Counting()
    publisher = ReferencedSetPublisher(cache, kube, ReferencedSetConfig(namespace=WARDEN_NS))
    clients = RegistryClients(cache, secret_reader(kube), counting_factory(counting))
    reclaim = Reclaimer(cache, clients, ReclaimConfig(safetyAge="0s", maxRemovalShare=1.0), fresh=publisher.fresh)
    with contextlib.ExitStack() as stack:
        stack.callback(cache.stop)
        stack.enter_context(proxy)  # left first: resets the hanging requests, so the cache stops at once
        assert cache.start().wait_synced(10), "informer cache did not sync"
        pushed = push_demo(registry, World(admin, cache))
        proxy.cut()
        World(admin, cache).version("created-during-the-cut", "example-com-demo", "0.9.0")

        result = await publisher.publish(T0)
        (report,) = await reclaim.run_once(result.reclaimable, T0)
        assert "0.9.0" in tags(registry), "an entry created during the cut lost its artifact"
        assert set(report.removed) <= {f"{DEMO_REPO}@{pushed['0.8.0'].digest}"}
        if result.result is Publication.PUBLISHED:
            doc = json.loads(kube.get(CONFIG_MAP, CONFIG_NAME, WARDEN_NS)["data"][CONFIGMAP_KEY])
            assert doc["registries"][registry.hostname][DEMO_REPO]["tags"] == ["0.9.0", "1.0.0"]
        else:
            assert result.result is Publication.INCOMPLETE and report.removed == []
        await clients.aclose()
