"""Deleting a Repository: the real garbage collector removes its PackageRevisions, Published ones included.

The owner reference (controller, blockOwnerDeletion) is set by our mutating webhook on CREATE.
The GC deletes the dependents as ``system:serviceaccount:kube-system:generic-garbage-collector``,
which the packages rules exempt (a user may not delete a Published revision while its Repository
exists). Each revision then waits on its finalizer ``porch.kpt.dev/packagerevisions``; the
sidecar's package bookkeeping releases it once the Repository is gone. Without that loop (it is
switched off where porch's own controller runs) the revisions stay Terminating on the finalizer:
:func:`test_without_the_bookkeeping_the_revisions_wait_on_the_finalizer_until_it_runs` shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from policies.packages import FINALIZER, MSG_DELETE_PUBLISHED
from tests.cluster.revisions import (
    REPOSITORIES,
    REVISIONS,
    bookkeeping_sidecar,
    create_revision,
    live,
    release_finalizers,
    repository,
    wait_repository_cached,
)
from tests.support.controlplane.cluster import Cluster, ServerProcess, SidecarProcess, wait_for
from webhook.kube.client import ApiError, Kube, NotFound

Obj = dict[str, object]

PUBLISHED = ("nginx.v1", "redis.v1")
DRAFTS = ("nginx.v2",)


@pytest.fixture
def repo(server: ServerProcess, admin: Kube, ns: str) -> Iterator[Obj]:
    """Repository ``blueprints`` with two Published revisions and a Draft, all owned by it."""
    created = repository(admin, ns)
    wait_repository_cached(admin, ns, created)
    for name in PUBLISHED:
        create_revision(admin, ns, name, published=True)
    for name in DRAFTS:
        create_revision(admin, ns, name)
    yield created
    release_finalizers(admin, ns)  # whatever a failed test left, so the namespace can go


def owned_by(repo: Obj, revisions: list[Obj]) -> list[list[tuple[str, str, bool, bool]]]:
    return [
        [
            (r["kind"], r["uid"], r.get("controller"), r.get("blockOwnerDeletion"))
            for r in rev["metadata"]["ownerReferences"]
        ]
        for rev in revisions
    ]


def names(revisions: list[Obj]) -> list[str]:
    return sorted(str(r["metadata"]["name"]) for r in revisions)  # type: ignore[index]


def numbered(admin: Kube, ns: str) -> bool:
    return all("revision" in r.get("status", {}) for r in live(admin, ns) if r["spec"]["lifecycle"] == "Published")


def test_deleting_a_repository_lets_the_garbage_collector_remove_its_revisions_published_included(
    cluster: Cluster, repo: Obj, admin: Kube, sidecar: Callable[..., SidecarProcess], ns: str
) -> None:
    bookkeeping_sidecar(cluster, sidecar, "sidecar-gc")
    wait_for(lambda: numbered(admin, ns), "the bookkeeping to number the Published revisions")
    before = live(admin, ns)
    assert names(before) == [f"blueprints.{n}" for n in sorted(PUBLISHED + DRAFTS)]
    assert owned_by(repo, before) == [[("Repository", repo["metadata"]["uid"], True, True)]] * 3
    with pytest.raises(ApiError) as refused:  # a user may not, while the Repository exists
        admin.request("DELETE", f"{REVISIONS.format(ns=ns)}/blueprints.nginx.v1")
    assert refused.value.status == 403
    assert refused.value.message.endswith(MSG_DELETE_PUBLISHED.format(repo=f"{ns}/blueprints"))

    admin.request("DELETE", f"{REPOSITORIES.format(ns=ns)}/blueprints")

    wait_for(lambda: live(admin, ns) == [], "the garbage collector and the bookkeeping to remove every revision")


def test_a_foreground_deletion_of_a_repository_completes(
    cluster: Cluster, repo: Obj, admin: Kube, sidecar: Callable[..., SidecarProcess], ns: str
) -> None:
    """``kubectl delete --cascade=foreground``: the Repository waits for its dependents (blockOwnerDeletion)."""
    bookkeeping_sidecar(cluster, sidecar, "sidecar-gc-foreground")

    admin.request("DELETE", f"{REPOSITORIES.format(ns=ns)}/blueprints", body={"propagationPolicy": "Foreground"})

    def gone() -> bool:
        try:
            admin.request("GET", f"{REPOSITORIES.format(ns=ns)}/blueprints")
        except NotFound:
            return live(admin, ns) == []
        return False

    wait_for(gone, "the Repository and every revision to be gone")


def test_without_the_bookkeeping_the_revisions_wait_on_the_finalizer_until_it_runs(
    cluster: Cluster, repo: Obj, admin: Kube, sidecar: Callable[..., SidecarProcess], ns: str
) -> None:
    admin.request("DELETE", f"{REPOSITORIES.format(ns=ns)}/blueprints")

    def collected() -> bool:
        return all("deletionTimestamp" in r["metadata"] for r in live(admin, ns))

    wait_for(collected, "the garbage collector to delete every revision")
    held = live(admin, ns)
    assert names(held) == [f"blueprints.{n}" for n in sorted(PUBLISHED + DRAFTS)]
    assert [r["metadata"]["finalizers"] for r in held] == [[FINALIZER]] * 3

    bookkeeping_sidecar(cluster, sidecar, "sidecar-gc-late")

    wait_for(lambda: live(admin, ns) == [], "the bookkeeping to release the finalizers")
