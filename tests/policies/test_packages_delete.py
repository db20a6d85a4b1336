"""PackageRevision DELETE: the Published gate and upstream protection, with their messages."""

from __future__ import annotations

import pytest

from policies.kinds import PACKAGE_REVISION
from policies.model import Operation
from policies.rules import Context
from tests.policies.test_packages_support import (
    ADMIN,
    ALICE,
    CONTROLLER,
    GC,
    NOW,
    NS_CONTROLLER,
    REPO_UID,
    changed,
    context,
    repository,
    request,
    revision,
    validate,
    view,
)

PUBLISHED_MSG = (
    "a Published revision must be proposed for deletion before it is deleted: set spec.lifecycle to "
    "DeletionProposed, then delete it (Repository team-a/blueprints still exists)"
)
GONE = "2026-11-29T12:00:00Z"
OWNED = [{"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository", "name": "blueprints", "uid": REPO_UID}]


def owned(lifecycle: str | None) -> dict:
    return changed(revision(lifecycle), "metadata", "ownerReferences", value=OWNED)


DELETE_CASES = [
    ("Draft", "repository exists", ALICE, [repository()], None),
    ("Proposed", "repository exists", ALICE, [repository()], None),
    ("DeletionProposed", "repository exists", ALICE, [repository()], None),
    (None, "empty lifecycle counts as Draft", ALICE, [repository()], None),
    ("Published", "repository exists", ALICE, [repository()], PUBLISHED_MSG),
    ("Published", "cluster-admin is no exception", ADMIN, [repository()], PUBLISHED_MSG),
    ("Published", "package controllers are no exception", CONTROLLER, [repository()], PUBLISHED_MSG),
    ("Published", "repository being deleted still exists", ALICE,
     [repository(deletionTimestamp=GONE)], PUBLISHED_MSG),
    ("Published", "repository gone", ALICE, [], None),
    ("Published", "repository re-created under the same name", ALICE, [repository(uid="another-uid")], None),
    ("Published", "garbage collector", GC, [repository()], None),
    ("Published", "namespace controller", NS_CONTROLLER, [repository()], None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("lifecycle", "case", "user", "state", "message"), DELETE_CASES, ids=[f"{c[0]}: {c[1]}" for c in DELETE_CASES]
)
def test_delete_gate(lifecycle: str | None, case: str, user, state: list, message: str | None) -> None:
    req = request(Operation.DELETE, old=owned(lifecycle), user=user)
    result = validate(req, context(*state))
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.reason) == ("packages.revision-delete-published", 403, "Forbidden")
        assert decision.message == message


def test_without_owner_reference_the_repository_is_found_by_name() -> None:
    req = request(Operation.DELETE, old=revision("Published"))
    name, decision = validate(req, context(repository(uid="any")))
    assert (name, decision.message) == ("packages.revision-delete-published", PUBLISHED_MSG)
    assert validate(req, context()) is None


# --- upstream protection ------------------------------------------------------------------------

UPSTREAM = "blueprints.nginx.v1"


def downstream(name: str, source: dict | None = None, *, version: str = "v1alpha2", **meta) -> dict:
    rev = revision("Draft", name=name, version=version)
    if source is not None:
        rev["spec"]["source"] = source
    rev["metadata"].update(meta)
    return rev


REFERRERS = [
    ("copyFrom", downstream("blueprints.nginx.v2", {"copyFrom": {"name": UPSTREAM}})),
    ("cloneFrom", downstream("deploy.nginx.edge", {"cloneFrom": {"upstreamRef": {"name": UPSTREAM}}})),
    ("clone.cloneFrom", downstream("deploy.nginx.core", {"clone": {"cloneFrom": {"upstreamRef": {"name": UPSTREAM}}}})),
    # clone.upstreamRef is porch's UpstreamPackage {type, git, upstreamRef}: the revision is one level down.
    ("v1alpha1 clone task", changed(
        downstream("deploy.nginx.lab", version="v1alpha1"),
        "spec", "tasks", value=[{"type": "clone", "clone": {"upstreamRef": {"upstreamRef": {"name": UPSTREAM}}}}])),
    ("v1alpha1 edit task", changed(
        downstream("blueprints.nginx.v3", version="v1alpha1"),
        "spec", "tasks", value=[{"type": "edit", "edit": {"sourceRef": {"name": UPSTREAM}}}])),
]  # fmt: skip


@pytest.mark.parametrize(("how", "referrer"), REFERRERS, ids=[h for h, _ in REFERRERS])
@pytest.mark.parametrize("lifecycle", ["Draft", "DeletionProposed"])
def test_an_upstream_cannot_be_deleted(how: str, referrer: dict, lifecycle: str) -> None:
    req = request(Operation.DELETE, old=revision(lifecycle, name=UPSTREAM))
    name, decision = validate(req, context(repository(), referrer))
    assert (name, decision.code) == ("packages.revision-delete-upstream", 403)
    ref = f"PackageRevision team-a/{referrer['metadata']['name']}"
    assert decision.message == (
        f"the revision is the upstream of {ref}; delete those revisions first (they were cloned or copied from it)"
    )


def test_referrers_are_listed_sorted_and_capped() -> None:
    refs = [downstream(f"blueprints.nginx.c{i}", {"copyFrom": {"name": UPSTREAM}}) for i in (7, 2, 5, 1, 6, 3, 4)]
    req = request(Operation.DELETE, old=revision("Draft", name=UPSTREAM))
    _, decision = validate(req, context(*refs))
    assert decision.message == (
        "the revision is the upstream of PackageRevision team-a/blueprints.nginx.c1, "
        "PackageRevision team-a/blueprints.nginx.c2, PackageRevision team-a/blueprints.nginx.c3, "
        "PackageRevision team-a/blueprints.nginx.c4, PackageRevision team-a/blueprints.nginx.c5 and 2 more; "
        "delete those revisions first (they were cloned or copied from it)"
    )


@pytest.mark.parametrize(
    ("case", "state"),
    [
        ("referrer in another namespace", [downstream("x", {"copyFrom": {"name": UPSTREAM}}, namespace="team-b")]),
        ("referrer being deleted", [downstream("x", {"copyFrom": {"name": UPSTREAM}}, deletionTimestamp=GONE)]),
        ("referrer names another revision", [downstream("x", {"copyFrom": {"name": "blueprints.nginx.v9"}})]),
        ("upgrade is not an upstream pin", [downstream("x", {"upgrade": {"newUpstream": {"name": UPSTREAM}}})]),
    ],
)  # fmt: skip
def test_no_live_referrer_no_denial(case: str, state: list) -> None:
    req = request(Operation.DELETE, old=revision("Draft", name=UPSTREAM))
    assert validate(req, context(*state)) is None


@pytest.mark.parametrize("user", [GC, NS_CONTROLLER], ids=["gc", "namespace-controller"])
def test_cluster_cleanup_deletes_upstreams_too(user) -> None:
    referrer = downstream("blueprints.nginx.v2", {"copyFrom": {"name": UPSTREAM}})
    req = request(Operation.DELETE, old=revision("Published", name=UPSTREAM), user=user)
    assert validate(req, context(repository(), referrer)) is None


def test_the_index_follows_updates_of_the_referrer() -> None:
    referrer = downstream("blueprints.nginx.v2", {"copyFrom": {"name": UPSTREAM}})
    state = view(referrer)
    req = request(Operation.DELETE, old=revision("Draft", name=UPSTREAM))
    assert validate(req, Context(view=state, now=NOW)) is not None
    state.remove(PACKAGE_REVISION, "blueprints.nginx.v2", "team-a")
    assert validate(req, Context(view=state, now=NOW)) is None
