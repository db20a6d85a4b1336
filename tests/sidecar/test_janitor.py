"""The retention janitor against the apiserver double, the informer cache and the real Writer.

The two races of seed 000 are forced, never timed: the Writer is hooked so that the cluster
changes after the plan was made and before its delete is sent; the delete's preconditions then
lose (409) and the entry survives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from policies.availability import AVAILABLE
from policies.catalog_deletion import CV_PROTECTION_FINALIZER
from policies.families import INDEXES
from policies.kinds import COMPONENT, COMPONENT_VERSION, EVENT, REGISTRY, RELEASE
from policies.model import GroupKind, Obj
from policies.objects import ref_of
from policies.retention import KeepReason
from policies.sidecar_config import RetentionConfig
from policies.view import MemoryView
from tests.sidecar.conftest import NS, SOLAR, T0, World
from tests.support.server import wait_until
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube, NotFound
from webhook.kube.writes import DeleteResult, Writer
from webhook.sidecar.janitor import DRY_RUN, EVENT_REASON, EVENT_REASON_DRY_RUN, MSG_NOT_LIVE, Janitor

pytestmark = pytest.mark.anyio

RED_SINCE = "2026-11-21T12:00:00Z"  # 8 days before T0: past the default minRedAge of 168h
CONFIG = RetentionConfig(enabled=True, keepLast=0)
KINDS = (COMPONENT, COMPONENT_VERSION, REGISTRY, RELEASE)


@pytest.fixture
def cache(kube: Kube) -> Iterator[InformerCache]:
    """The sidecar's cache as the runner builds it: Releases included (the janitor's "unreferenced")."""
    c = InformerCache(kube, KINDS).start()
    assert c.wait_synced(10), "informer cache did not sync"
    yield c
    c.stop()


class HookedWriter(Writer):
    """The real Writer; ``between`` runs after the plan, just before each delete is sent."""

    between: Callable[[Obj], None] | None = None

    def delete_if_unchanged(self, kind: GroupKind, obj: Obj) -> DeleteResult:
        if self.between is not None:
            self.between(obj)
        return super().delete_if_unchanged(kind, obj)


@pytest.fixture
def writer(kube: Kube) -> HookedWriter:
    return HookedWriter(kube, instance="test")


def red(world: World, name: str, since: str = RED_SINCE) -> None:
    cond = {"type": AVAILABLE, "status": "False", "reason": "ArtifactMissing", "message": "m"}
    world.patch_status(name, {"conditions": [{**cond, "lastTransitionTime": since}]})


def settle(admin: Kube, cache: InformerCache) -> None:
    def same() -> bool:
        for kind in KINDS:
            api = {ref_of(o): o["metadata"]["resourceVersion"] for o in admin.list(kind)["items"]}
            if api != {ref_of(o): o["metadata"]["resourceVersion"] for o in cache.list(kind)}:
                return False
        return True

    wait_until(same, timeout=10, what="the informer cache to catch up with the apiserver")


def exists(admin: Kube, name: str) -> bool:
    try:
        admin.get(COMPONENT_VERSION, name, NS)
    except NotFound:
        return False
    return True


def events(admin: Kube) -> list[tuple[str, str, str]]:
    return sorted((e["involvedObject"]["name"], e["reason"], e["message"]) for e in admin.list(EVENT, NS)["items"])


@pytest.fixture
def entries(world: World, admin: Kube, cache: InformerCache) -> None:
    """``old``: red for 8 days, unreferenced, no finalizer. ``kept``: red as long, but protected."""
    world.component("demo", "reg.example", "ocm/example.com/demo")
    world.version("old", "demo", "1.0.0")
    world.version("kept", "demo", "1.1.0")
    red(world, "old")
    red(world, "kept")
    admin.patch(COMPONENT_VERSION, "kept", NS, {"metadata": {"finalizers": [CV_PROTECTION_FINALIZER]}})
    settle(admin, cache)


async def test_a_red_unreferenced_aged_entry_is_deleted_and_an_event_says_why(
    entries: None, admin: Kube, cache: InformerCache, writer: HookedWriter
) -> None:
    report = await Janitor(cache, writer, CONFIG).run_once(T0)
    assert report is not None
    assert report.results == {f"{NS}/old": str(DeleteResult.DELETED)}
    assert report.plan is not None and report.plan.kept == {f"{NS}/kept": KeepReason.PROTECTED}
    assert not exists(admin, "old")
    assert exists(admin, "kept")  # a finalizer-protected entry stays, and is not even terminating
    assert "deletionTimestamp" not in admin.get(COMPONENT_VERSION, "kept", NS)["metadata"]
    assert events(admin) == [
        (
            "old",
            EVENT_REASON,
            "deleted by the retention janitor: Available=False since 2026-11-21T12:00:00Z (192h0m0s, at least "
            "168h0m0s), no live Release references it, not among the newest 0 of Component team-a/demo; "
            'label it catalog-warden.io/retain="true" to keep such an entry',
        )
    ]


def bind_release_and_protect(admin: Kube) -> Callable[[Obj], None]:
    """Race (a): a Release binds and the Release controller adds the protection finalizer."""

    def act(obj: Obj) -> None:
        name = obj["metadata"]["name"]
        body = {
            "apiVersion": SOLAR,
            "kind": "Release",
            "metadata": {"name": "late", "namespace": NS},
            "spec": {"componentVersionRef": {"name": name}},
        }
        admin.create(RELEASE, body)
        admin.patch(COMPONENT_VERSION, name, NS, {"metadata": {"finalizers": [CV_PROTECTION_FINALIZER]}})

    return act


def artifact_returns(admin: Kube) -> Callable[[Obj], None]:
    """Race (b): the artifact is pushed again and the availability loop turns the entry green."""

    def act(obj: Obj) -> None:
        cond = {"type": AVAILABLE, "status": "True", "reason": "ArtifactResolved", "message": "back"}
        status = {"conditions": [{**cond, "lastTransitionTime": "2026-11-29T11:59:00Z"}]}
        admin.patch(COMPONENT_VERSION, obj["metadata"]["name"], NS, {"status": status})

    return act


@pytest.mark.parametrize(
    "race", [bind_release_and_protect, artifact_returns], ids=["release-binds", "artifact-returns"]
)
async def test_a_change_between_plan_and_delete_skips_the_entry(
    race: Callable[[Kube], Callable[[Obj], None]],
    entries: None,
    admin: Kube,
    cache: InformerCache,
    writer: HookedWriter,
) -> None:
    seen: list[str] = []

    def between(obj: Obj) -> None:
        seen.append(obj["metadata"]["resourceVersion"])
        race(admin)(obj)

    writer.between = between
    janitor = Janitor(cache, writer, CONFIG)
    report = await janitor.run_once(T0)
    assert report is not None
    assert report.results == {f"{NS}/old": str(DeleteResult.SKIPPED_CONFLICT)}
    assert len(seen) == 1
    assert exists(admin, "old")
    assert "deletionTimestamp" not in admin.get(COMPONENT_VERSION, "old", NS)["metadata"]
    assert events(admin) == []

    # the next sweep sees the new state and keeps the entry for what changed
    writer.between = None
    settle(admin, cache)
    again = await janitor.run_once(T0 + timedelta(hours=2))
    assert again is not None and again.results == {}
    assert again.plan is not None and again.plan.kept[f"{NS}/old"] in {KeepReason.PROTECTED, KeepReason.NOT_RED}
    assert exists(admin, "old")


async def test_dry_run_deletes_nothing_and_reports_what_it_would_delete(
    entries: None, admin: Kube, cache: InformerCache, writer: HookedWriter
) -> None:
    deletes: list[Any] = []
    writer.between = deletes.append
    report = await Janitor(cache, writer, CONFIG.model_copy(update={"dryRun": True})).run_once(T0)
    assert report is not None and report.results == {f"{NS}/old": DRY_RUN}
    assert deletes == []
    assert exists(admin, "old") and exists(admin, "kept")
    [(name, reason, message)] = events(admin)
    assert (name, reason) == ("old", EVENT_REASON_DRY_RUN)
    assert message.startswith("would be deleted by the retention janitor: Available=False since 2026-11-21T12:00:00Z")


async def test_a_replica_that_lost_the_lease_sends_no_delete(
    entries: None, admin: Kube, cache: InformerCache, writer: HookedWriter
) -> None:
    deletes: list[Any] = []
    writer.between = deletes.append
    report = await Janitor(cache, writer, CONFIG, may_act=lambda: False).run_once(T0)
    assert report is not None and report.results == {}
    assert report.stopped == "this replica no longer holds the Lease; nothing more is deleted"
    assert deletes == [] and exists(admin, "old")


async def test_sweeps_wait_for_the_interval(entries: None, cache: InformerCache, writer: HookedWriter) -> None:
    janitor = Janitor(cache, writer, CONFIG.model_copy(update={"dryRun": True, "interval": timedelta(hours=1)}))
    assert await janitor.run_once(T0) is not None
    assert await janitor.run_once(T0 + timedelta(minutes=59)) is None
    assert await janitor.run_once(T0 + timedelta(hours=1)) is not None


async def test_a_cache_that_stops_being_live_mid_sweep_sends_no_further_delete(
    entries: None, world: World, admin: Kube, cache: InformerCache, writer: HookedWriter
) -> None:
    """The plan was made on a live cache; once a watch goes down (the informer then reports not
    synced) a Release bound since could be invisible, so the janitor stops before its next delete.
    Forced through a view frozen from the cache, whose liveness the test turns off after one delete."""
    world.version("older", "demo", "0.9.0")
    red(world, "older")
    settle(admin, cache)
    view = MemoryView(INDEXES, synced=True)
    for kind in KINDS:
        for obj in cache.list(kind):
            view.put(kind, obj)
    deletes: list[str] = []

    def watch_goes_down(obj: Obj) -> None:
        deletes.append(obj["metadata"]["name"])
        view.mark_synced(False)

    writer.between = watch_goes_down
    report = await Janitor(view, writer, CONFIG).run_once(T0)
    assert report is not None and report.plan is not None and len(report.plan.deletions) == 2
    assert len(deletes) == 1 and list(report.results.values()) == [str(DeleteResult.DELETED)]
    assert report.stopped == MSG_NOT_LIVE
    assert report.stopped == "the cluster cache is no longer live (a watch is down); nothing more is deleted"
    assert sorted(n for n in ("old", "older") if exists(admin, n)) == sorted({"old", "older"} - set(deletes))


def test_a_cache_that_does_not_watch_releases_is_refused(kube: Kube, writer: HookedWriter) -> None:
    """Without Releases every entry would look unreferenced, so the janitor refuses to exist."""
    blind = InformerCache(kube, (COMPONENT, COMPONENT_VERSION))
    with pytest.raises(ValueError, match="the retention janitor needs a cache that watches Releases"):
        Janitor(blind, writer, CONFIG.model_copy(update={"enabled": True}))
    Janitor(blind, writer, CONFIG.model_copy(update={"enabled": False}))  # switched off: no objection
