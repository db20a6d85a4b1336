"""PackageRevision mutations: defaults on CREATE and the publish stamp on the way into Published.

Every patch is applied with ``jsonpatch`` to the request object (as the shell and the apiserver
do), and the idempotence check re-runs the mutating rules on their own output: the second pass
must return an empty patch.
"""

from __future__ import annotations

import copy

import jsonpatch
import pytest

from policies.model import Operation
from policies.rules import Context
from tests.policies.test_packages_support import (
    ALICE,
    CONTROLLER,
    NOW,
    REPO_UID,
    changed,
    context,
    mutate_all,
    patches,
    repository,
    request,
    revision,
    rule,
    validate,
    view,
)

FINALIZER = "porch.kpt.dev/packagerevisions"
OWNER = {
    "apiVersion": "config.porch.kpt.dev/v1alpha1",
    "kind": "Repository",
    "name": "blueprints",
    "uid": REPO_UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def again(req, obj):
    """The same request with ``obj`` as its object: the idempotence check's second pass."""
    return request(req.operation, obj, req.old_object, user=req.user, version=req.version)


# --- CREATE defaults ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "mode", "labels"),
    [
        ("v1alpha2", "alongside", {"porch.kpt.dev/latest-revision": "false"}),
        ("v1alpha2", "standalone", {"porch.kpt.dev/latest-revision": "false"}),
        # Our CRD stores v1alpha1 as v1alpha2: the finalizer and owner, and no latest label (the
        # validating path refuses it on a v1alpha1 CREATE, as Porch does; the bookkeeping sets it).
        ("v1alpha1", "standalone", None),
    ],
)
@pytest.mark.parametrize("lifecycle", [None, ""])
def test_create_defaults(version: str, mode: str, labels: dict | None, lifecycle: str | None) -> None:
    req = request(Operation.CREATE, revision(lifecycle, version=version), version=version)
    ctx = context(repository(), mode=mode)
    out, warnings = mutate_all(req, ctx)
    assert warnings == []
    expected = copy.deepcopy(req.object)
    expected["spec"]["lifecycle"] = "Draft"
    expected["metadata"].update(
        finalizers=[FINALIZER], ownerReferences=[OWNER], **({"labels": labels} if labels else {})
    )
    assert out == expected
    assert req.object["spec"].get("lifecycle") == lifecycle, "the request object must not be modified"
    assert patches(again(req, out), ctx) == []
    assert validate(again(req, out), ctx) is None, "the defaulted object passes validation"


def test_create_keeps_what_is_there() -> None:
    obj = revision("Proposed", labels={"app": "nginx", "porch.kpt.dev/latest-revision": "false"})
    obj["metadata"]["finalizers"] = ["example.com/keep", FINALIZER]
    obj["metadata"]["ownerReferences"] = [OWNER]
    req = request(Operation.CREATE, obj)
    assert patches(req, context(repository())) == []


def test_create_appends_to_existing_finalizers_and_labels() -> None:
    obj = revision("Draft", labels={"app": "nginx"})
    obj["metadata"]["finalizers"] = ["example.com/keep"]
    out, warnings = mutate_all(request(Operation.CREATE, obj), context(repository()))
    assert warnings == []
    assert out["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]
    assert out["metadata"]["labels"] == {"app": "nginx", "porch.kpt.dev/latest-revision": "false"}


def test_a_user_supplied_latest_label_is_left_for_validation_to_refuse() -> None:
    obj = revision("Draft", labels={"porch.kpt.dev/latest-revision": "true"})
    req = request(Operation.CREATE, obj)
    out, _ = mutate_all(req, context(repository()))
    assert out["metadata"]["labels"] == {"porch.kpt.dev/latest-revision": "true"}
    name, _ = validate(again(req, out), context(repository()))
    assert name == "packages.revision-latest-label"


def test_a_discovered_published_revision_keeps_its_lifecycle() -> None:
    req = request(Operation.CREATE, revision("Published", source=None), user=CONTROLLER)
    out, _ = mutate_all(req, context(repository()))
    assert out["spec"]["lifecycle"] == "Published"
    assert out["metadata"]["finalizers"] == [FINALIZER]


def test_unknown_repository_leaves_the_owner_and_warns() -> None:
    req = request(Operation.CREATE, revision("Draft"))
    ctx = context()
    out, warnings = mutate_all(req, ctx)
    assert "ownerReferences" not in out["metadata"]
    assert warnings == ["Repository team-a/blueprints not found yet; its owner reference is added once it exists"]
    assert all(len(w) <= 120 for w in warnings)
    assert out["spec"]["lifecycle"] == "Draft" and out["metadata"]["finalizers"] == [FINALIZER]
    assert patches(again(req, out), ctx) == []


def test_a_repository_in_another_namespace_is_not_the_owner() -> None:
    out, warnings = mutate_all(request(Operation.CREATE, revision("Draft")), context(repository(ns="team-b")))
    assert "ownerReferences" not in out["metadata"]
    assert len(warnings) == 1


@pytest.mark.parametrize(
    "existing",
    [
        {k: v for k, v in OWNER.items() if k not in ("controller", "blockOwnerDeletion")},
        {**OWNER, "uid": "stale-uid"},
        {**OWNER, "blockOwnerDeletion": False},
    ],
    ids=["discovery-style", "stale uid", "no blockOwnerDeletion"],
)
def test_an_incomplete_repository_reference_is_replaced(existing: dict) -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "seed", "uid": "cm-uid"}
    obj = changed(revision("Draft"), "metadata", "ownerReferences", value=[other, existing])
    req = request(Operation.CREATE, obj)
    ctx = context(repository())
    out, warnings = mutate_all(req, ctx)
    assert warnings == []
    assert out["metadata"]["ownerReferences"] == [other, OWNER]
    assert patches(again(req, out), ctx) == []


def test_another_controller_owner_is_respected() -> None:
    boss = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "boss", "uid": "d-uid", "controller": True}
    obj = changed(revision("Draft"), "metadata", "ownerReferences", value=[boss])
    out, warnings = mutate_all(request(Operation.CREATE, obj), context(repository()))
    assert out["metadata"]["ownerReferences"] == [boss]
    assert warnings == [
        "owner Deployment/boss is already the controller; no controller reference to Repository team-a/blueprints added"
    ]
    assert len(warnings[0]) <= 120


# --- UPDATE into Published ----------------------------------------------------------------------

BY = "catalog-warden.io/published-by"
AT = "catalog-warden.io/published-at"


def test_publishing_stamps_who_and_when() -> None:
    before = revision("Proposed", annotations={"note": "x"})
    req = request(Operation.UPDATE, changed(before, "spec", "lifecycle", value="Published"), before)
    ctx = context(repository())
    decision = rule("packages.revision-publish-stamp")(req, ctx)
    out = jsonpatch.apply_patch(req.object, list(decision.patch))
    assert out["metadata"]["annotations"] == {"note": "x", BY: "alice@example.com", AT: "2026-11-29T12:30:05Z"}
    assert out["spec"] == req.object["spec"]
    assert patches(again(req, out), ctx) == []
    assert validate(again(req, out), ctx) is None, "the stamped object passes validation"


def test_the_stamp_uses_the_context_clock() -> None:
    before = revision("Proposed")
    req = request(Operation.UPDATE, revision("Published"), before)
    out, _ = mutate_all(req, Context(view=view(), now=NOW.replace(hour=18)))
    assert out["metadata"]["annotations"][AT] == "2026-11-29T18:30:05Z"


def test_a_present_record_is_not_rewritten() -> None:
    before = revision("Proposed")
    stamped = {BY: "alice@example.com", AT: "2026-11-29T11:00:00Z"}
    req = request(Operation.UPDATE, revision("Published", annotations=stamped), before)
    assert patches(req, context()) == []


def test_a_half_record_is_completed_without_touching_the_other_half() -> None:
    req = request(
        Operation.UPDATE, revision("Published", annotations={AT: "2026-11-29T11:00:00Z"}), revision("Proposed")
    )
    out, _ = mutate_all(req, context())
    assert out["metadata"]["annotations"] == {AT: "2026-11-29T11:00:00Z", BY: "alice@example.com"}


@pytest.mark.parametrize(
    ("old", "new"),
    [("Draft", "Proposed"), ("Proposed", "Draft"), ("Published", "DeletionProposed"), ("DeletionProposed", "Published"),
     ("Published", "Published"), ("Proposed", "Proposed")],
)  # fmt: skip
def test_no_stamp_without_a_publish(old: str, new: str) -> None:
    req = request(Operation.UPDATE, revision(new), revision(old), user=ALICE)
    assert patches(req, context()) == []


def test_update_never_re_adds_defaults() -> None:
    """Defaults are a CREATE matter; an UPDATE without the finalizer is the controller's business."""
    req = request(Operation.UPDATE, revision("Proposed"), revision("Draft"))
    assert patches(req, context(repository())) == []


def test_a_present_publisher_is_kept_and_left_for_validation_to_judge() -> None:
    req = request(Operation.UPDATE, revision("Published", annotations={BY: "bob"}), revision("Proposed"))
    out, _ = mutate_all(req, context())
    assert out["metadata"]["annotations"] == {BY: "bob", AT: "2026-11-29T12:30:05Z"}
    name, _ = validate(again(req, out), context())
    assert name == "packages.revision-publish-record"


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha2"])
def test_an_empty_lifecycle_is_defaulted_on_update_too(version: str) -> None:
    """v1alpha1 allows lifecycle "" but v1alpha2 storage does not: keep it out of storage."""
    old = revision("Draft", version=version)
    new = revision("", version=version)
    req = request(Operation.UPDATE, new, old, version=version)
    out, _ = mutate_all(req, context(repository()))
    assert out["spec"]["lifecycle"] == "Draft"
    assert patches(again(req, out), context(repository())) == []
