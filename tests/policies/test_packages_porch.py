"""PackageRevision rules as Porch really runs them (DESIGN.md sections 3 and 5, reference A4-A6).

Porch's v1alpha1 aggregated apiserver calls our webhooks: a v1alpha1 CREATE may only be a Draft and
may carry no ``kpt.dev/latest-revision`` label at all, and publishing goes through the
``packagerevisions/approval`` subresource, which the transition and identity rules judge as they do
a v1alpha2 lifecycle change. Alongside Porch the mutating path adds nothing Porch's strategy refuses
(the label) or stores for nobody to remove (the v1alpha2 controller's finalizer).
"""

from __future__ import annotations

import copy

import pytest

from policies.model import Operation
from tests.policies.test_packages_support import (
    ALICE,
    CONTROLLER,
    WARDEN,
    changed,
    context,
    mutate_all,
    patches,
    repository,
    request,
    revision,
    validate,
)

V1 = "kpt.dev/latest-revision"
CREATE_V1_MSG = (
    "spec.lifecycle {} is not allowed on creation through porch.kpt.dev/v1alpha1, which creates only Drafts; "
    "create the revision as Draft and propose it afterwards"
)
TRANSITION_MSG = "spec.lifecycle cannot change from {} to {} (allowed from {}: {}); {}"
DRAFT_WAY_OUT = "propose it first (spec.lifecycle: Proposed)"
FINAL_WAY_OUT = "published content is final: create a new Draft revision with spec.source.copyFrom"

# --- CREATE through v1alpha1 ----------------------------------------------------------------------

CREATE_V1 = [
    # (lifecycle, user, rule, message); the same in both modes: our CRD is a stand-in for Porch's server
    ("Draft", ALICE, None, None),
    ("", ALICE, None, None),
    (None, ALICE, None, None),
    ("Proposed", ALICE, "packages.revision-lifecycle", CREATE_V1_MSG.format("Proposed")),
    ("Published", ALICE, "packages.revision-lifecycle", CREATE_V1_MSG.format("Published")),
    ("DeletionProposed", ALICE, "packages.revision-lifecycle", CREATE_V1_MSG.format("DeletionProposed")),
    ("Published", CONTROLLER, None, None),  # discovered revisions: decided by identity
]


@pytest.mark.parametrize("mode", ["alongside", "standalone"])
@pytest.mark.parametrize(("lifecycle", "user", "rule", "message"), CREATE_V1)
def test_a_v1alpha1_create_is_a_draft(lifecycle, user, rule, message, mode: str) -> None:
    req = request(Operation.CREATE, revision(lifecycle, version="v1alpha1"), user=user, version="v1alpha1")
    result = validate(req, context(repository(), mode=mode))
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.message) == (rule, 403, message)


def test_a_v1alpha2_create_may_still_be_proposed() -> None:
    req = request(Operation.CREATE, revision("Proposed"), version="v1alpha2")
    assert validate(req, context(repository())) is None


@pytest.mark.parametrize("lifecycle", [None, "", "Draft"])
def test_alongside_porch_a_v1alpha1_create_gets_only_the_draft_default(lifecycle) -> None:
    """No latest-revision label (Porch refuses it), no finalizer, no owner reference: Porch owns those."""
    req = request(Operation.CREATE, revision(lifecycle, version="v1alpha1"), version="v1alpha1")
    ctx = context(repository(), mode="alongside")
    out, warnings = mutate_all(req, ctx)
    expected = copy.deepcopy(req.object)
    expected["spec"]["lifecycle"] = "Draft"
    assert (out, warnings) == (expected, [])
    assert V1 not in out["metadata"].get("labels", {})
    assert validate(request(Operation.CREATE, out, version="v1alpha1"), ctx) is None, "Porch's strategy accepts it"


@pytest.mark.parametrize("mode", ["alongside", "standalone"])
def test_no_v1alpha1_create_gets_a_latest_revision_label(mode: str) -> None:
    req = request(Operation.CREATE, revision(None, version="v1alpha1"), version="v1alpha1")
    ctx = context(repository(), mode=mode)
    out, _ = mutate_all(req, ctx)
    assert out["metadata"].get("labels", {}) == {}
    assert validate(request(Operation.CREATE, out, version="v1alpha1"), ctx) is None


def test_alongside_porch_a_v1alpha1_publish_gets_no_publish_record() -> None:
    """Porch records the publisher in the publish's git commit, and no bookkeeping of ours runs there."""
    before = revision("Proposed", version="v1alpha1")
    after = changed(before, "spec", "lifecycle", value="Published")
    req = request(Operation.UPDATE, after, before, version="v1alpha1")
    assert patches(req, context(repository(), mode="alongside")) == []
    stamped = patches(req, context(repository(), mode="standalone"))
    assert [p["path"] for p in stamped] == ["/metadata/annotations"]


# --- the approval subresource ---------------------------------------------------------------------

APPROVAL = [
    # (old, new, user, rule, message)
    ("Proposed", "Published", ALICE, None, None),
    ("Proposed", "Draft", ALICE, None, None),
    ("DeletionProposed", "Published", ALICE, None, None),
    ("Published", "DeletionProposed", ALICE, None, None),
    (
        "Draft",
        "Published",
        ALICE,
        "packages.revision-lifecycle",
        TRANSITION_MSG.format("Draft", "Published", "Draft", "Proposed", DRAFT_WAY_OUT),
    ),
    (
        "Published",
        "Draft",
        ALICE,
        "packages.revision-lifecycle",
        TRANSITION_MSG.format("Published", "Draft", "Published", "DeletionProposed", FINAL_WAY_OUT),
    ),
    (
        "DeletionProposed",
        "Proposed",
        WARDEN,
        "packages.revision-lifecycle",
        TRANSITION_MSG.format("DeletionProposed", "Proposed", "DeletionProposed", "Published", FINAL_WAY_OUT),
    ),
]


@pytest.mark.parametrize(("old", "new", "user", "rule", "message"), APPROVAL)
def test_approval_follows_the_transitions(old: str, new: str, user, rule, message) -> None:
    before = revision(old, version="v1alpha1", revision=1 if old != "Proposed" else 0)
    after = changed(before, "spec", "lifecycle", value=new)
    req = request(Operation.UPDATE, after, before, user=user, version="v1alpha1", sub_resource="approval")
    result = validate(req, context(repository()))
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.message) == (rule, 403, message)


APPROVAL_IDENTITY = [
    # (path, value, rule, message): what an approval may not smuggle in beside the lifecycle
    (
        ("metadata", "labels"),
        {V1: "true"},
        "packages.revision-latest-label",
        "label kpt.dev/latest-revision is managed by the package controllers and cannot be changed ('' to 'true')",
    ),
    (
        ("spec", "revision"),
        7,
        "packages.revision-number",
        "spec.revision is assigned by the package controllers on publish (stored as v1alpha2 status.revision) "
        "and cannot be changed (0 to 7)",
    ),
    (
        ("metadata", "annotations"),
        {"catalog-warden.io/published-by": "mallory"},
        "packages.revision-publish-record",
        "annotation catalog-warden.io/published-by records who published the revision and is written by "
        "catalog-warden; remove it from the request",
    ),
    (
        ("spec", "packageName"),
        "other",
        "packages.revision-immutable",
        "immutable fields changed: spec.packageName; create a new PackageRevision instead",
    ),
]


@pytest.mark.parametrize(("path", "value", "rule", "message"), APPROVAL_IDENTITY)
def test_approval_is_judged_by_the_identity_rules(path, value, rule, message) -> None:
    before = revision("Proposed", version="v1alpha1")
    after = changed(changed(before, "spec", "lifecycle", value="Published"), *path, value=value)
    req = request(Operation.UPDATE, after, before, version="v1alpha1", sub_resource="approval")
    name, decision = validate(req, context(repository()))
    assert (name, decision.message) == (rule, message)


def test_approval_is_never_mutated() -> None:
    """The publisher on approval is Porch's own record (its git commit): no publishedBy annotation."""
    before = revision("Proposed", version="v1alpha1")
    after = changed(before, "spec", "lifecycle", value="Published")
    for mode in ("alongside", "standalone"):
        req = request(Operation.UPDATE, after, before, version="v1alpha1", sub_resource="approval")
        assert patches(req, context(repository(), mode=mode)) == []
