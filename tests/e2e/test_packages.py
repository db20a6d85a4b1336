"""Package lifecycle end to end (issue 8): the whole life of a revision, its mutations, and the cascade.

The sidecar's bookkeeping (which releases the deletion finalizer) is not running here: the test
stands in for it by removing the finalizer as the warden, exactly the write the sidecar makes.
"""

from __future__ import annotations

import copy
from typing import Any

from policies.identity import GARBAGE_COLLECTOR
from policies.packages import (
    FINALIZER,
    LATEST_LABEL_V1ALPHA2,
    MSG_DELETE_PUBLISHED,
    PUBLISHED_AT,
    PUBLISHED_BY,
)
from tests.e2e.conftest import USER, Cluster, Objects, Refusal, Resource, denied, refused
from tests.support.server import wait_until

PORCH = "porch.kpt.dev"
REPOSITORY = Resource("config.porch.kpt.dev", "v1alpha1", "repositories", "Repository")
REVISION = Resource(PORCH, "v1alpha2", "packagerevisions", "PackageRevision")
REVISION_V1ALPHA1 = Resource(PORCH, "v1alpha1", "packagerevisions", "PackageRevision")

VALIDATE = "packages.validate.catalog-warden.io"


def repository(name: str, ns: str) -> dict[str, Any]:
    spec = {"type": "git", "git": {"repo": "https://git.example.com/blueprints.git", "branch": "main"}}
    return REPOSITORY.manifest(name, ns, spec=spec)


def revision(name: str, ns: str, repo: str, workspace: str = "v1") -> dict[str, Any]:
    spec = {"packageName": "web", "repository": repo, "workspaceName": workspace, "source": {"init": {}}}
    return REVISION.manifest(name, ns, spec=spec)


def lifecycle(revisions: Objects, name: str, ns: str, value: str) -> dict[str, Any]:
    return revisions.patch(name, {"spec": {"lifecycle": value}}, ns).object


def published(cluster: Cluster, ns: str, name: str, repo: str, workspace: str = "v1") -> dict[str, Any]:
    """A revision taken Draft -> Proposed -> Published by a user."""
    revisions = cluster.user(REVISION)
    revisions.create(revision(name, ns, repo, workspace))
    lifecycle(revisions, name, ns, "Proposed")
    return lifecycle(revisions, name, ns, "Published")


def release_finalizer(cluster: Cluster, name: str, ns: str) -> None:
    """What the sidecar's bookkeeping does once the lifecycle allows the delete."""
    cluster.warden(REVISION).patch(name, {"metadata": {"finalizers": None}}, ns)


def with_repository(cluster: Cluster, ns: str, name: str = "blueprints") -> dict[str, Any]:
    """A Repository the webhook's cache already knows (the owner reference reads its uid there)."""
    created = cluster.user(REPOSITORY).create(repository(name, ns)).object
    return cluster.stack.wait_caught_up(REPOSITORY.group_kind, created)


def test_a_revision_lives_from_draft_to_deleted_without_ever_hanging_in_terminating(cluster: Cluster, ns: str) -> None:
    with_repository(cluster, ns)
    revisions = cluster.user(REVISION)
    revisions.create(revision("web-v1", ns, "blueprints"))
    lifecycle(revisions, "web-v1", ns, "Proposed")
    stored = lifecycle(revisions, "web-v1", ns, "Published")
    cluster.stack.wait_caught_up(REVISION.group_kind, stored)

    refusal = refused(lambda: revisions.delete("web-v1", ns))

    message = MSG_DELETE_PUBLISHED.format(repo=f"{ns}/blueprints")
    rule = "packages.revision-delete-published"
    assert refusal == Refusal(403, denied(VALIDATE, "PackageRevision", f"{ns}/web-v1", rule, message))
    assert "deletionTimestamp" not in revisions.get("web-v1", ns)["metadata"]

    lifecycle(revisions, "web-v1", ns, "DeletionProposed")
    deleting = revisions.delete("web-v1", ns).object
    assert (deleting["metadata"]["finalizers"], "deletionTimestamp" in deleting["metadata"]) == ([FINALIZER], True)

    release_finalizer(cluster, "web-v1", ns)
    assert not revisions.exists("web-v1", ns)


def test_creation_is_mutated_once_and_an_update_that_changes_nothing_stays_unchanged(cluster: Cluster, ns: str) -> None:
    repo = with_repository(cluster, ns)
    revisions = cluster.user(REVISION)

    stored = revisions.create(revision("web-v1", ns, "blueprints")).object

    assert stored["spec"]["lifecycle"] == "Draft"
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert stored["metadata"]["labels"] == {LATEST_LABEL_V1ALPHA2: "false"}
    assert stored["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "config.porch.kpt.dev/v1alpha1",
            "kind": "Repository",
            "name": "blueprints",
            "uid": repo["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]

    # the stored object sent back unchanged: no patch, so no write
    again = revisions.replace(copy.deepcopy(stored))
    assert again.object == stored
    assert again.warnings == []

    # the mutation run on its own output adds nothing (a dry-run creation of the same shape)
    twin = copy.deepcopy(stored)
    metadata = twin["metadata"]
    for server_field in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        metadata.pop(server_field)
    metadata["name"] = "web-v1-twin"
    preview = revisions.create(twin, dry_run=True).object
    assert {k: preview["metadata"][k] for k in ("finalizers", "labels", "ownerReferences")} == {
        k: stored["metadata"][k] for k in ("finalizers", "labels", "ownerReferences")
    }
    assert preview["spec"] == stored["spec"]


def test_publishing_records_who_published(cluster: Cluster, ns: str) -> None:
    with_repository(cluster, ns)

    stored = published(cluster, ns, "web-v1", "blueprints")

    annotations = stored["metadata"]["annotations"]
    assert annotations[PUBLISHED_BY] == USER
    assert sorted(annotations) == [PUBLISHED_AT, PUBLISHED_BY]


def test_a_repository_deleted_in_the_background_takes_its_published_revisions_with_it(
    cluster: Cluster, ns: str
) -> None:
    with_repository(cluster, ns)
    published(cluster, ns, "web-v1", "blueprints")
    cluster.user(REVISION).create(revision("web-v2", ns, "blueprints", workspace="v2"))
    revisions = cluster.user(REVISION)

    cluster.user(REPOSITORY).delete("blueprints", ns, propagation="Background")

    def collected() -> bool:
        return all("deletionTimestamp" in revisions.get(n, ns)["metadata"] for n in ("web-v1", "web-v2"))

    wait_until(collected, timeout=10, what="the garbage collector to delete the revisions")
    gc_deletes = sorted(
        review["name"]
        for hook, review in cluster.stack.apiserver.webhook_calls
        if hook == VALIDATE
        and review["operation"] == "DELETE"
        and review.get("namespace") == ns
        and review["userInfo"]["username"] == GARBAGE_COLLECTOR
    )
    assert gc_deletes == ["web-v1", "web-v2"]
    assert [e for e in cluster.stack.apiserver.controllers.errors if f"'{ns}'" in e] == []

    for name in ("web-v1", "web-v2"):
        release_finalizer(cluster, name, ns)
        assert not revisions.exists(name, ns)


def test_a_v1alpha1_client_gets_the_same_mutations_and_answers_through_conversion(cluster: Cluster, ns: str) -> None:
    with_repository(cluster, ns)
    old_clients = cluster.user(REVISION_V1ALPHA1)
    spec = {"packageName": "web", "repository": "blueprints", "workspaceName": "v1", "tasks": [{"type": "init"}]}

    created = old_clients.create(REVISION_V1ALPHA1.manifest("web-v1", ns, spec=spec)).object

    # No latest-revision label on a v1alpha1 CREATE (Porch's strategy refuses one): the bookkeeping sets it.
    assert (created["spec"]["lifecycle"], created["metadata"].get("labels")) == ("Draft", None)
    stored = cluster.user(REVISION).get("web-v1", ns)
    assert LATEST_LABEL_V1ALPHA2 not in stored["metadata"].get("labels", {})
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    for value in ("Proposed", "Published"):
        lifecycle(old_clients, "web-v1", ns, value)
    refusal = refused(lambda: old_clients.delete("web-v1", ns))
    message = MSG_DELETE_PUBLISHED.format(repo=f"{ns}/blueprints")
    rule = "packages.revision-delete-published"
    assert refusal == Refusal(403, denied(VALIDATE, "PackageRevision", f"{ns}/web-v1", rule, message))
