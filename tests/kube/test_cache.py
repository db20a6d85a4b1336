"""The informer cache against the double: synced gating, consistency under a stream of changes,
resuming watches without relisting, and surviving 410 Gone."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

from policies import kinds
from policies.families import INDEXES
from policies.model import GroupKind
from tests.kube.conftest import NS, MakeCache, Recorder
from tests.support.apiserver import ApiServerDouble
from tests.support.apiserver.errors import ApiError
from tests.support.server import wait_until
from webhook.kube.cache import DEFAULT_KINDS, InformerCache, slim
from webhook.kube.client import Kube

SOLAR_V1 = "solar.opendefense.cloud/v1alpha1"
STREAM_KINDS = (kinds.COMPONENT_VERSION, kinds.RELEASE, kinds.HELM_CLUSTER_ADDON)


def cv(name: str, component: str = "demo") -> dict[str, Any]:
    return {
        "apiVersion": SOLAR_V1,
        "kind": "ComponentVersion",
        "metadata": {"name": name, "namespace": NS, "labels": {"solar.opendefense.cloud/component": component}},
        "spec": {"tag": "v1"},
    }


def release(name: str, cv_name: str) -> dict[str, Any]:
    return {
        "apiVersion": SOLAR_V1,
        "kind": "Release",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"componentVersionRef": {"name": cv_name}},
    }


def addon(name: str, repository: str, chart: str) -> dict[str, Any]:
    return {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddon",
        "metadata": {"name": name},
        "spec": {"chart": {"helmClusterAddonRepository": repository, "helmClusterAddonChart": chart}},
    }


CREATE: dict[GroupKind, Callable[[str, int], dict[str, Any]]] = {
    kinds.COMPONENT_VERSION: lambda name, t: cv(name, f"c{t}"),
    kinds.RELEASE: lambda name, t: release(name, f"cv{t}"),
    kinds.HELM_CLUSTER_ADDON: lambda name, t: addon(name, f"repo{t % 3}", f"chart{t}"),
}
UPDATE: dict[GroupKind, Callable[[int], dict[str, Any]]] = {
    kinds.COMPONENT_VERSION: lambda t: {"metadata": {"labels": {"solar.opendefense.cloud/component": f"c{t}"}}},
    kinds.RELEASE: lambda t: {"spec": {"componentVersionRef": {"name": f"cv{t}"}}},
    kinds.HELM_CLUSTER_ADDON: lambda t: {"spec": {"chart": {"helmClusterAddonChart": f"chart{t}"}}},
}
"""What the stream does to each kind: every update moves an index key (label, reference, chart)."""


def key_of(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def caught_up(cache: InformerCache, double: ApiServerDouble, kinds_: tuple[GroupKind, ...]) -> Callable[[], bool]:
    """True once every kind's reflector has seen (by event or bookmark) the double's current resourceVersion."""
    target = double.resource_version
    return lambda: all(int(cache.resource_version(k) or 0) >= target for k in kinds_)


def assert_same_as_fresh_list(cache: InformerCache, kube: Kube, kinds_: tuple[GroupKind, ...], keys: set[str]) -> None:
    """The cache equals a fresh list, object for object, and every index answers as if rebuilt from it."""
    for kind in kinds_:
        listed = kube.list(kind)
        resource = kube.resource(kind)
        fresh = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): slim(
                {"apiVersion": resource.api_version, "kind": kind.kind, **o}
            )
            for o in listed["items"]
        }
        cached = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in cache.list(kind)}
        assert cached.keys() == fresh.keys(), kind
        assert cached == fresh, kind
        for index, fn in INDEXES.get(kind, {}).items():
            expected: dict[str, set[tuple[str, str]]] = {}
            for key, obj in fresh.items():
                for index_key in fn(obj):
                    expected.setdefault(index_key, set()).add(key)
            for index_key in keys | set(expected):
                got = {
                    (o["metadata"].get("namespace", ""), o["metadata"]["name"])
                    for o in cache.indexed(kind, index, index_key)
                }
                assert got == expected.get(index_key, set()), (kind, index, index_key)


def test_synced_only_after_every_kind_was_listed(apiserver: ApiServerDouble, make_cache: MakeCache) -> None:
    release_list = threading.Event()
    listed: list[str] = []
    original = apiserver.api.list

    def gated_list(target: Any, params: dict[str, str]) -> Any:
        listed.append(target.resource.plural)
        if target.resource.plural == "releases":
            assert release_list.wait(20)
        return original(target, params)

    apiserver.api.list = gated_list  # type: ignore[method-assign]
    cache = make_cache()
    wait_until(lambda: len(set(listed)) == len(DEFAULT_KINDS), what="every kind listed")
    assert not cache.synced
    assert not cache.wait_synced(0.05)
    release_list.set()
    assert cache.wait_synced(10)
    assert cache.synced
    assert set(cache.kinds()) == DEFAULT_KINDS


def test_consistent_after_ten_thousand_creates_updates_and_deletes(
    apiserver: ApiServerDouble, kube: Kube, admin: Kube, make_cache: MakeCache
) -> None:
    admin.create(kinds.COMPONENT_VERSION, cv("before"))  # present at the initial list
    cache = make_cache()
    assert cache.wait_synced(10)
    writers, per_writer = 4, 2500
    counts = {"create": 0, "update": 0, "delete": 0}
    lock = threading.Lock()
    index_keys: set[str] = set()

    def writer(w: int) -> None:
        rnd = random.Random(w)
        live: dict[GroupKind, dict[str, dict[str, Any]]] = {k: {} for k in STREAM_KINDS}
        for i in range(per_writer):
            kind = rnd.choice(STREAM_KINDS)
            objs = live[kind]
            op = "create" if len(objs) < 3 else rnd.choice(("create", "update", "update", "delete"))
            target = rnd.choice(range(8))
            if op == "create":
                name = f"w{w}-{i}"
                objs[name] = admin.create(kind, CREATE[kind](name, target))
            elif op == "update":
                name = rnd.choice(sorted(objs))
                patch = {
                    kinds.COMPONENT_VERSION: {
                        "metadata": {"labels": {"solar.opendefense.cloud/component": f"c{target}"}}
                    },
                    kinds.RELEASE: {"spec": {"componentVersionRef": {"name": f"cv{target}"}}},
                    kinds.HELM_CLUSTER_ADDON: {"spec": {"chart": {"helmClusterAddonChart": f"chart{target}"}}},
                }[kind]
                namespace = objs[name]["metadata"].get("namespace", "")
                objs[name] = admin.patch(kind, name, namespace, patch)
            else:
                name = rnd.choice(sorted(objs))
                admin.delete(kind, name, objs.pop(name)["metadata"].get("namespace", ""))
            with lock:
                counts[op] += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts.values()) == writers * per_writer == 10_000
    assert min(counts.values()) > 1000, counts
    index_keys |= {f"{NS}/c{t}" for t in range(8)} | {f"{NS}/cv{t}" for t in range(8)}
    index_keys |= {f"repo{t % 3}/chart{t}" for t in range(8)} | {f"repo{t}" for t in range(3)}

    wait_until(caught_up(cache, apiserver, STREAM_KINDS), timeout=60, what="cache caught up")
    assert_same_as_fresh_list(cache, kube, STREAM_KINDS, index_keys)
    assert cache.get(kinds.COMPONENT_VERSION, "before", NS) is not None
    assert [cache.relists(k) for k in STREAM_KINDS] == [0, 0, 0]
    assert apiserver.failures == []


def test_watch_ends_resume_from_the_last_version_without_relisting(
    apiserver: ApiServerDouble, admin: Kube, make_cache: MakeCache, recorder: Recorder
) -> None:
    cache = make_cache(kinds=[kinds.COMPONENT_VERSION, kinds.RELEASE], watch_timeout=3)
    assert cache.wait_synced(10)
    created = admin.create(kinds.COMPONENT_VERSION, cv("a"))
    created_rv = int(created["metadata"]["resourceVersion"])
    wait_until(lambda: cache.get(kinds.COMPONENT_VERSION, "a", NS) is not None, what="a cached")
    # A change to a Release moves the store's version; the ComponentVersion watch can only learn it by bookmark.
    admin.create(kinds.RELEASE, release("r", "a"))
    wait_until(lambda: int(cache.resource_version(kinds.COMPONENT_VERSION)) > created_rv, what="a bookmark")
    wait_until(lambda: cache.watches(kinds.COMPONENT_VERSION) >= 2, timeout=10, what="the watch restarted")
    admin.patch(kinds.COMPONENT_VERSION, "a", NS, {"spec": {"tag": "v2"}})
    wait_until(lambda: cache.get(kinds.COMPONENT_VERSION, "a", NS)["spec"]["tag"] == "v2", what="update cached")

    assert cache.relists(kinds.COMPONENT_VERSION) == 0
    assert len(recorder.of("list", "componentversions")) == 1
    watches = recorder.of("watch", "componentversions")
    assert all(w.params["allowWatchBookmarks"] == "true" and w.params["timeoutSeconds"] == "3" for w in watches)
    versions = [int(w.params["resourceVersion"]) for w in watches]
    assert versions == sorted(versions)
    assert versions[0] < created_rv
    assert versions[1] > created_rv, "the next watch resumed from the bookmark's version"


def test_a_watch_that_gets_410_relists_and_keeps_watching(
    apiserver: ApiServerDouble, admin: Kube, make_cache: MakeCache, recorder: Recorder
) -> None:
    admin.create(kinds.COMPONENT_VERSION, cv("old"))
    cache = make_cache(kinds=[kinds.COMPONENT_VERSION])
    assert cache.wait_synced(10)
    apiserver.set_watch_window(0)  # no history kept: a watcher that has not yet read an event finds it gone
    admin.create(kinds.COMPONENT_VERSION, cv("during-1"))
    admin.delete(kinds.COMPONENT_VERSION, "old", NS)
    wait_until(lambda: cache.relists(kinds.COMPONENT_VERSION) >= 1, what="a relist after 410")
    wait_until(caught_up(cache, apiserver, (kinds.COMPONENT_VERSION,)), what="relisted up to the last write")
    assert [o["metadata"]["name"] for o in cache.list(kinds.COMPONENT_VERSION)] == ["during-1"]
    apiserver.set_watch_window(100_000)
    relists = cache.relists(kinds.COMPONENT_VERSION)
    admin.create(kinds.COMPONENT_VERSION, cv("after"))
    wait_until(lambda: cache.get(kinds.COMPONENT_VERSION, "after", NS) is not None, what="watch after relist")
    wait_until(caught_up(cache, apiserver, (kinds.COMPONENT_VERSION,)), what="caught up")

    names = sorted(o["metadata"]["name"] for o in cache.list(kinds.COMPONENT_VERSION))
    assert names == ["after", "during-1"]
    assert cache.relists(kinds.COMPONENT_VERSION) == relists, "no further relist once the window is back"
    assert len(recorder.of("list", "componentversions")) == 1 + relists
    assert apiserver.failures == []


def test_stop_ends_open_watches_promptly(make_cache: MakeCache) -> None:
    cache = make_cache(watch_timeout=300)
    assert cache.wait_synced(10)
    cache.stop(timeout=5)
    assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("informer-"))


def test_a_failing_list_is_retried_with_backoff(apiserver: ApiServerDouble, make_cache: MakeCache) -> None:
    failures = {"n": 0}
    original = apiserver.api.list

    def flaky_list(target: Any, params: dict[str, str]) -> Any:
        if target.resource.plural == "releases" and failures["n"] < 2:
            failures["n"] += 1
            raise ApiError(503, "ServiceUnavailable", "simulated outage")
        return original(target, params)

    apiserver.api.list = flaky_list  # type: ignore[method-assign]
    cache = make_cache(kinds=[kinds.RELEASE], backoff=(0.01, 0.05))
    assert cache.wait_synced(10)
    assert failures["n"] == 2
