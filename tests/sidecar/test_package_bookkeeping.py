"""Package bookkeeping through the full stack: apiserver double -> our real webhooks -> cache.

Users act through the official client; the sidecar's writes are made as the warden and admitted
(or not) by the real packages rules, exactly as in a cluster. Each pass runs on the cache after
it caught up with what the test wrote, so what a pass sees is forced, never timed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from policies.kinds import PACKAGE_REVISION, REPOSITORY
from policies.model import Obj
from policies.package_bookkeeping import LATEST_LABEL
from policies.packages import FINALIZER, PUBLISHED_AT, PUBLISHED_BY
from tests.sidecar.conftest import T0
from tests.support.stack import WARDEN, Stack
from webhook.kube.cache import InformerCache
from webhook.kube.client import Conflict, Kube
from webhook.kube.writes import Writer
from webhook.sidecar.package_bookkeeping import BookkeepingReport, PackageBookkeeper, Result, Write

pytestmark = pytest.mark.anyio

USER = "alice"
GROUPS = ("developers", "system:masters")
PORCH = ("porch.kpt.dev", "v1alpha2", "packagerevisions")
REPOS = ("config.porch.kpt.dev", "v1alpha1", "repositories")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_NAMESPACES = itertools.count(1)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with Stack() as started:
        yield started


@pytest.fixture
def ns(stack: Stack) -> str:
    name = f"packages-{next(_NAMESPACES)}"
    stack.core(USER, GROUPS).create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def bookkeeper(stack: Stack) -> PackageBookkeeper:
    assert stack.cache is not None
    return PackageBookkeeper(stack.cache, Writer(Kube(stack.api_client(WARDEN)), instance="test"))


class User:
    """Alice, who creates, publishes and deletes revisions through the official client."""

    def __init__(self, stack: Stack, ns: str) -> None:
        self.stack = stack
        self.ns = ns
        self.api: client.CustomObjectsApi = stack.custom(USER, GROUPS)

    def repository(self, name: str = "blueprints") -> Obj:
        body = {
            "apiVersion": "config.porch.kpt.dev/v1alpha1",
            "kind": "Repository",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"type": "git", "git": {"repo": "https://git.example.com/blueprints.git", "branch": "main"}},
        }
        created = self.api.create_namespaced_custom_object(*REPOS[:2], self.ns, REPOS[2], body)
        return self.stack.wait_caught_up(REPOSITORY, created)

    def delete_repository(self, name: str = "blueprints") -> None:
        self.api.delete_namespaced_custom_object(*REPOS[:2], self.ns, REPOS[2], name)
        self.stack.wait_uncached(REPOSITORY, name, self.ns)

    def published(self, name: str) -> Obj:
        body = {
            "apiVersion": "porch.kpt.dev/v1alpha2",
            "kind": "PackageRevision",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"repository": "blueprints", "packageName": "web", "workspaceName": name, "source": {"init": {}}},
        }
        self.api.create_namespaced_custom_object(*PORCH[:2], self.ns, PORCH[2], body)
        self.lifecycle(name, "Proposed")
        return self.lifecycle(name, "Published")

    def lifecycle(self, name: str, value: str) -> Obj:
        patch = {"spec": {"lifecycle": value}}
        stored = self.api.patch_namespaced_custom_object(*PORCH[:2], self.ns, PORCH[2], name, patch)
        return self.stack.wait_caught_up(PACKAGE_REVISION, stored)

    def delete(self, name: str) -> Obj:
        self.api.delete_namespaced_custom_object(*PORCH[:2], self.ns, PORCH[2], name)
        return self.stack.wait_cached(PACKAGE_REVISION, name, self.ns, lambda o: bool(o and _terminating(o)))  # type: ignore[return-value]

    def get(self, name: str) -> Obj:
        obj: Obj = self.api.get_namespaced_custom_object(*PORCH[:2], self.ns, PORCH[2], name)
        return obj

    def exists(self, name: str) -> bool:
        try:
            self.get(name)
        except client.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _terminating(obj: Obj) -> bool:
    return "deletionTimestamp" in obj["metadata"]


@pytest.fixture
def alice(stack: Stack, ns: str) -> User:
    return User(stack, ns)


def warden_writes(stack: Stack, since: int) -> list[tuple[str, str]]:
    return [
        (r.method, r.path) for r in stack.apiserver.requests[since:] if r.method in WRITE_METHODS and r.user == WARDEN
    ]


async def bookkeeping_pass(stack: Stack, bookkeeper: PackageBookkeeper) -> BookkeepingReport:
    """One pass; then wait until the cache holds every revision the pass wrote."""
    report = await bookkeeper.run_once(T0)
    for package in report.planned:
        for writes in package.revisions:
            name, ns = writes.obj["metadata"]["name"], writes.obj["metadata"]["namespace"]
            if writes.release_finalizer:
                stack.wait_uncached(PACKAGE_REVISION, name, ns)
            else:
                fresh = Kube(stack.admin).get(PACKAGE_REVISION, name, ns)
                stack.wait_caught_up(PACKAGE_REVISION, fresh)
    assert stack.apiserver.failures == []
    return report


def labels(alice: User, *names: str) -> dict[str, str]:
    return {n: alice.get(n)["metadata"]["labels"][LATEST_LABEL] for n in names}


def status_of(obj: Obj) -> dict[str, Any]:
    return {k: obj.get("status", {}).get(k) for k in ("revision", "publishedBy", "publishedAt")}


async def test_publish_two_then_delete_the_latest(stack: Stack, alice: User, bookkeeper: PackageBookkeeper) -> None:
    alice.repository()
    first = alice.published("web-v1")
    recorded_at = first["metadata"]["annotations"][PUBLISHED_AT]
    assert first["metadata"]["annotations"][PUBLISHED_BY] == USER

    report = await bookkeeping_pass(stack, bookkeeper)

    key = f"{alice.ns}/web-v1"
    assert report.results == {(key, Write.STATUS): Result.WRITTEN, (key, Write.METADATA): Result.WRITTEN}
    stored = alice.get("web-v1")
    assert status_of(stored) == {"revision": 1, "publishedBy": USER, "publishedAt": recorded_at}
    assert "annotations" not in stored["metadata"] or not (
        {PUBLISHED_BY, PUBLISHED_AT} & set(stored["metadata"]["annotations"])
    )
    assert labels(alice, "web-v1") == {"web-v1": "true"}

    alice.published("web-v2")
    await bookkeeping_pass(stack, bookkeeper)

    assert status_of(alice.get("web-v2"))["revision"] == 2
    assert labels(alice, "web-v1", "web-v2") == {"web-v1": "false", "web-v2": "true"}

    # steady: a pass plans and sends nothing
    since = len(stack.apiserver.requests)
    steady = await bookkeeping_pass(stack, bookkeeper)
    assert (steady.planned, steady.results, warden_writes(stack, since)) == ((), {}, [])

    # propose deletion of the latest and delete it: the finalizer goes, and so does the label
    alice.lifecycle("web-v2", "DeletionProposed")
    deleting = alice.delete("web-v2")
    assert deleting["metadata"]["finalizers"] == [FINALIZER]

    report = await bookkeeping_pass(stack, bookkeeper)

    assert report.results == {
        (key, Write.METADATA): Result.WRITTEN,
        (f"{alice.ns}/web-v2", Write.FINALIZER): Result.WRITTEN,
    }
    assert not alice.exists("web-v2")
    assert labels(alice, "web-v1") == {"web-v1": "true"}

    since = len(stack.apiserver.requests)
    steady = await bookkeeping_pass(stack, bookkeeper)
    assert (steady.planned, steady.results, warden_writes(stack, since)) == ((), {}, [])


async def test_a_published_revision_whose_repository_is_gone_is_released(
    stack: Stack, alice: User, bookkeeper: PackageBookkeeper
) -> None:
    alice.repository()
    alice.published("web-v1")
    await bookkeeping_pass(stack, bookkeeper)

    # with its Repository present, a Published revision cannot be deleted at all (admission)
    with pytest.raises(client.ApiException) as refused:
        alice.api.delete_namespaced_custom_object(*PORCH[:2], alice.ns, PORCH[2], "web-v1")
    assert refused.value.status == 403

    alice.delete_repository()
    deleting = alice.delete("web-v1")
    assert deleting["spec"]["lifecycle"] == "Published"

    report = await bookkeeping_pass(stack, bookkeeper)

    assert report.results == {(f"{alice.ns}/web-v1", Write.FINALIZER): Result.WRITTEN}
    assert not alice.exists("web-v1")


async def test_a_published_revision_terminating_beside_its_repository_is_kept(
    stack: Stack, alice: User, bookkeeper: PackageBookkeeper
) -> None:
    """The finalizer's own job (defence in depth): the garbage collector may delete past admission."""
    alice.repository()
    alice.published("web-v1")
    await bookkeeping_pass(stack, bookkeeper)
    gc = stack.custom("system:serviceaccount:kube-system:generic-garbage-collector")
    gc.delete_namespaced_custom_object(*PORCH[:2], alice.ns, PORCH[2], "web-v1")
    stack.wait_cached(PACKAGE_REVISION, "web-v1", alice.ns, lambda o: bool(o and _terminating(o)))

    report = await bookkeeping_pass(stack, bookkeeper)

    # it stays, but is no longer latest: latest-revision=true must not select it beside a successor
    assert report.results == {(f"{alice.ns}/web-v1", Write.METADATA): Result.WRITTEN}
    assert labels(alice, "web-v1") == {"web-v1": "false"}
    assert alice.get("web-v1")["metadata"]["finalizers"] == [FINALIZER]

    since = len(stack.apiserver.requests)
    steady = await bookkeeping_pass(stack, bookkeeper)
    assert (steady.results, warden_writes(stack, since)) == ({}, [])
    assert alice.get("web-v1")["metadata"]["finalizers"] == [FINALIZER]


def test_a_cache_that_does_not_watch_repositories_is_refused(stack: Stack) -> None:
    """Without Repositories every Published revision would look orphaned and lose its finalizer."""
    kube = Kube(stack.api_client(WARDEN))
    blind = InformerCache(kube, (PACKAGE_REVISION,))
    with pytest.raises(ValueError) as refused:
        PackageBookkeeper(blind, Writer(kube, instance="test"))
    assert str(refused.value) == "the package bookkeeping needs a cache that watches Repositories"
    PackageBookkeeper(InformerCache(kube, (PACKAGE_REVISION, REPOSITORY)), Writer(kube, instance="test"))


async def test_a_failed_demotion_holds_the_promotion_so_two_revisions_are_never_latest(
    stack: Stack, alice: User, bookkeeper: PackageBookkeeper, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice.repository()
    alice.published("web-v1")
    await bookkeeping_pass(stack, bookkeeper)
    alice.published("web-v2")

    real_patch = bookkeeper.writer.kube.patch

    def demotion_loses_a_race(kind, name, namespace, body, *args, **kwargs):
        if name == "web-v1" and (body.get("metadata", {}).get("labels") or {}).get(LATEST_LABEL) == "false":
            raise Conflict(409, "Conflict", "the object has been modified")
        return real_patch(kind, name, namespace, body, *args, **kwargs)

    monkeypatch.setattr(bookkeeper.writer.kube, "patch", demotion_loses_a_race)
    report = await bookkeeper.run_once(T0)
    v1, v2 = f"{alice.ns}/web-v1", f"{alice.ns}/web-v2"
    assert (report.results[(v1, Write.METADATA)], report.results[(v2, Write.METADATA)]) == (
        Result.CONFLICT,
        Result.DEFERRED,
    )
    assert labels(alice, "web-v1", "web-v2") == {"web-v1": "true", "web-v2": "false"}

    monkeypatch.setattr(bookkeeper.writer.kube, "patch", real_patch)
    for name in ("web-v1", "web-v2"):
        stack.wait_caught_up(PACKAGE_REVISION, Kube(stack.admin).get(PACKAGE_REVISION, name, alice.ns))
    await bookkeeping_pass(stack, bookkeeper)
    assert labels(alice, "web-v1", "web-v2") == {"web-v1": "false", "web-v2": "true"}
