"""PackageRevision UPDATE: immutable fields, the frozen published spec, the latest-revision
label and the publish record annotations."""

from __future__ import annotations

from typing import Any

import pytest

from policies.model import Operation
from tests.policies.test_packages_support import (
    ADMIN,
    ALICE,
    CONTROLLER,
    WARDEN,
    changed,
    context,
    request,
    revision,
    validate,
)

# --- immutable fields ---------------------------------------------------------------------------

IMMUTABLE = [
    ("v1alpha2", ("spec", "repository"), "other-repo", "spec.repository"),
    ("v1alpha2", ("spec", "packageName"), "haproxy", "spec.packageName"),
    ("v1alpha2", ("spec", "workspaceName"), "v2", "spec.workspaceName"),
    ("v1alpha2", ("spec", "source"), {"copyFrom": {"name": "blueprints.nginx.main"}}, "spec.source"),
    ("v1alpha2", ("spec", "source"), None, "spec.source"),
    ("v1alpha1", ("spec", "repository"), "other-repo", "spec.repository"),
    ("v1alpha1", ("spec", "workspaceName"), "v2", "spec.workspaceName"),
    ("v1alpha1", ("spec", "tasks"), [{"type": "clone", "clone": {"upstreamRef": {"name": "x"}}}], "spec.tasks[0]"),
]


@pytest.mark.parametrize(("version", "path", "value", "label"), IMMUTABLE, ids=[f"{v}:{f}" for v, *_, f in IMMUTABLE])
@pytest.mark.parametrize("lifecycle", ["Draft", "Proposed", "Published"])
@pytest.mark.parametrize("user", [ALICE, CONTROLLER, WARDEN], ids=["user", "controller", "warden"])
def test_immutable_field(version: str, path: tuple[str, ...], value: Any, label: str, lifecycle: str, user) -> None:
    before = revision(lifecycle, version=version)
    req = request(Operation.UPDATE, changed(before, *path, value=value), before, user=user, version=version)
    name, decision = validate(req, context())
    assert (name, decision.code, decision.reason) == ("packages.revision-immutable", 422, "Invalid")
    assert decision.message == f"immutable fields changed: {label}; create a new PackageRevision instead"


def test_every_changed_immutable_field_is_named() -> None:
    before = revision("Draft")
    after = changed(changed(before, "spec", "packageName", value="b"), "spec", "workspaceName", value="w2")
    _, decision = validate(request(Operation.UPDATE, after, before), context())
    assert decision.message == (
        "immutable fields changed: spec.packageName, spec.workspaceName; create a new PackageRevision instead"
    )


def test_setting_a_source_on_a_discovered_revision_is_a_change() -> None:
    before = revision("Draft", source=None)
    after = changed(before, "spec", "source", value={"init": {}})
    name, _ = validate(request(Operation.UPDATE, after, before), context())
    assert name == "packages.revision-immutable"


def test_v1alpha1_drafts_may_append_edit_tasks() -> None:
    before = revision("Draft", version="v1alpha1")
    after = changed(before, "spec", "tasks", value=[*before["spec"]["tasks"], {"type": "render"}])
    assert validate(request(Operation.UPDATE, after, before, version="v1alpha1"), context()) is None


# --- the frozen spec of published revisions -----------------------------------------------------

GATES = [{"conditionType": "nephio.org.Specializer.specialize"}]
META = {"labels": {"team": "edge"}}


@pytest.mark.parametrize(
    ("old", "new", "field", "value", "message"),
    [
        ("Draft", "Draft", "readinessGates", GATES, None),
        ("Proposed", "Proposed", "packageMetadata", META, None),
        ("Proposed", "Published", "readinessGates", GATES, None),
        ("Published", "Published", "readinessGates", GATES,
         "the spec of a Published revision is frozen except spec.lifecycle (changed: spec.readinessGates); "
         "create a new Draft revision with spec.source.copyFrom to change it"),
        ("Published", "DeletionProposed", "packageMetadata", META,
         "the spec of a Published revision is frozen except spec.lifecycle (changed: spec.packageMetadata); "
         "create a new Draft revision with spec.source.copyFrom to change it"),
        ("DeletionProposed", "DeletionProposed", "packageMetadata", META,
         "the spec of a DeletionProposed revision is frozen except spec.lifecycle (changed: spec.packageMetadata); "
         "create a new Draft revision with spec.source.copyFrom to change it"),
        ("DeletionProposed", "Published", "readinessGates", GATES,
         "the spec of a DeletionProposed revision is frozen except spec.lifecycle (changed: spec.readinessGates); "
         "create a new Draft revision with spec.source.copyFrom to change it"),
    ],
)  # fmt: skip
def test_frozen_spec(old: str, new: str, field: str, value: Any, message: str | None) -> None:
    before = revision(old)
    after = changed(changed(before, "spec", "lifecycle", value=new), "spec", field, value=value)
    for user in (ALICE, CONTROLLER, WARDEN):
        result = validate(request(Operation.UPDATE, after, before, user=user), context())
        if message is None:
            assert result is None
        else:
            name, decision = result
            assert (name, decision.code, decision.message) == ("packages.revision-immutable", 422, message)


@pytest.mark.parametrize(("old", "new"), [("Published", "DeletionProposed"), ("DeletionProposed", "Published")])
def test_lifecycle_metadata_and_status_still_change_when_published(old: str, new: str) -> None:
    before = revision(old, labels={"app": "nginx"})
    after = changed(changed(before, "spec", "lifecycle", value=new), "metadata", "labels", value={"app": "web"})
    after["status"] = {"revision": 3}
    assert validate(request(Operation.UPDATE, after, before), context()) is None


def test_a_v1alpha1_published_spec_is_frozen_too() -> None:
    before = revision("Published", version="v1alpha1", revision=2)
    after = changed(before, "spec", "tasks", value=[*before["spec"]["tasks"], {"type": "render"}])
    name, decision = validate(request(Operation.UPDATE, after, before, version="v1alpha1"), context())
    assert name == "packages.revision-immutable"
    assert "(changed: spec.tasks)" in decision.message


# --- the latest-revision label ------------------------------------------------------------------

V1 = "kpt.dev/latest-revision"
V2 = "porch.kpt.dev/latest-revision"
CREATE_MSG = 'label {}={!r} is managed by the package controllers; omit it or set it to "false" on creation'
UPDATE_MSG = "label {} is managed by the package controllers and cannot be changed ({!r} to {!r})"

V1_CREATE_MSG = "label {}={!r} is managed by porch and cannot be set on a porch.kpt.dev/v1alpha1 creation; omit it"

LABEL_CREATE = [
    # (labels, user, message on a v1alpha1 CREATE, message on a v1alpha2 CREATE)
    (None, ALICE, None, None),
    ({V2: "false"}, ALICE, None, None),
    # Porch's v1alpha1 strategy refuses its label on create whatever the value (reference A4).
    ({V1: "false"}, ALICE, V1_CREATE_MSG.format(V1, "false"), None),
    ({V2: "true"}, ALICE, CREATE_MSG.format(V2, "true"), CREATE_MSG.format(V2, "true")),
    ({V1: "true"}, ALICE, V1_CREATE_MSG.format(V1, "true"), CREATE_MSG.format(V1, "true")),
    ({V2: ""}, ALICE, CREATE_MSG.format(V2, ""), CREATE_MSG.format(V2, "")),
    ({V2: "false", V1: "true"}, ALICE, V1_CREATE_MSG.format(V1, "true"), CREATE_MSG.format(V1, "true")),
    ({V2: "true"}, ADMIN, CREATE_MSG.format(V2, "true"), CREATE_MSG.format(V2, "true")),
    ({V2: "true"}, CONTROLLER, None, None),
    ({V1: "true"}, CONTROLLER, None, None),
    ({V2: "true"}, WARDEN, None, None),
]


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha2"])
@pytest.mark.parametrize(("labels", "user", "v1_message", "v2_message"), LABEL_CREATE)
def test_latest_label_on_create(labels, user, v1_message: str | None, v2_message: str | None, version: str) -> None:
    message = v1_message if version == "v1alpha1" else v2_message
    req = request(Operation.CREATE, revision("Draft", labels=labels, version=version), user=user, version=version)
    result = validate(req, context())
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.message) == ("packages.revision-latest-label", 403, message)


LABEL_UPDATE = [
    ({V2: "false"}, {V2: "false"}, ALICE, None),
    (None, None, ALICE, None),
    ({V2: "false"}, {V2: "true"}, ALICE, UPDATE_MSG.format(V2, "false", "true")),
    ({V2: "true"}, {V2: "false"}, ALICE, UPDATE_MSG.format(V2, "true", "false")),
    ({V2: "true"}, {}, ALICE, UPDATE_MSG.format(V2, "true", "")),
    (None, {V2: "false"}, ALICE, UPDATE_MSG.format(V2, "", "false")),
    ({V1: "true"}, {V1: "false"}, ALICE, UPDATE_MSG.format(V1, "true", "false")),
    ({V2: "false"}, {V2: "true"}, ADMIN, UPDATE_MSG.format(V2, "false", "true")),
    ({V2: "false"}, {V2: "true"}, CONTROLLER, None),
    ({V2: "true"}, {}, WARDEN, None),
]


@pytest.mark.parametrize(("old", "new", "user", "message"), LABEL_UPDATE)
def test_latest_label_on_update(old, new, user, message: str | None) -> None:
    req = request(Operation.UPDATE, revision("Published", labels=new), revision("Published", labels=old), user=user)
    result = validate(req, context())
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.message) == ("packages.revision-latest-label", 403, message)


# --- the publish record -------------------------------------------------------------------------

BY = "catalog-warden.io/published-by"
AT = "catalog-warden.io/published-at"
RECORD_MSG = (
    "annotation {} records who published the revision and is written by catalog-warden; remove it from the request"
)
STAMP = {BY: ALICE.username, AT: "2026-11-29T12:30:05Z"}

RECORD = [
    ("CREATE on a Draft", None, "Draft", {BY: "mallory"}, ALICE, RECORD_MSG.format(BY)),
    ("CREATE by a controller", None, "Published", {AT: "2026-01-01T00:00:00Z"}, CONTROLLER, RECORD_MSG.format(AT)),
    ("forged ahead on a Draft", "Draft", "Draft", {BY: "mallory"}, ALICE, RECORD_MSG.format(BY)),
    ("forged on Proposed to Draft", "Proposed", "Draft", {BY: ALICE.username}, ALICE, RECORD_MSG.format(BY)),
    ("own record on publish", "Proposed", "Published", STAMP, ALICE, None),
    ("someone else's name on publish", "Proposed", "Published", {**STAMP, BY: "mallory"}, ALICE, RECORD_MSG.format(BY)),
    ("a bad time on publish", "Proposed", "Published", {**STAMP, AT: "yesterday"}, ALICE, RECORD_MSG.format(AT)),
    ("rewritten after publish", "Published", "Published", {BY: "mallory"}, ALICE, RECORD_MSG.format(BY)),
    ("warden removes it", "Published", "Published", {}, WARDEN, None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "old", "new", "annotations", "user", "message"), RECORD, ids=[c[0] for c in RECORD])
def test_publish_record(case: str, old, new: str, annotations, user, message: str | None) -> None:
    old_annotations = STAMP if old == "Published" else None
    before = revision(old, annotations=old_annotations) if old else None
    op = Operation.UPDATE if before else Operation.CREATE
    req = request(op, revision(new, annotations=annotations), before, user=user)
    result = validate(req, context())
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.message) == ("packages.revision-publish-record", 403, message)


def test_the_publish_record_may_be_left_absent() -> None:
    """The mutating webhook fails open; a publish without the record must still pass."""
    assert validate(request(Operation.UPDATE, revision("Published"), revision("Proposed")), context()) is None


# --- the revision number (v1alpha1 spec.revision, stored as v1alpha2 status.revision) ------------

REV_CREATE_MSG = (
    "spec.revision {} is assigned by the package controllers on publish (stored as v1alpha2 status.revision); "
    "omit it or set it to 0"
)
REV_UPDATE_MSG = (
    "spec.revision is assigned by the package controllers on publish (stored as v1alpha2 status.revision) "
    "and cannot be changed ({} to {})"
)

REVISION_CREATE = [
    (None, ALICE, None),
    (0, ALICE, None),
    (3, ALICE, REV_CREATE_MSG.format(3)),
    (-1, ALICE, REV_CREATE_MSG.format(-1)),
    (3, ADMIN, REV_CREATE_MSG.format(3)),
    (3, CONTROLLER, None),
    (3, WARDEN, None),
]


@pytest.mark.parametrize(("value", "user", "message"), REVISION_CREATE)
@pytest.mark.parametrize("lifecycle", ["Draft", ""])  # v1alpha1 creates only Drafts (empty is Draft)
def test_revision_number_on_create(value: int | None, user, message: str | None, lifecycle: str) -> None:
    obj = revision(lifecycle, version="v1alpha1", revision=value)
    result = validate(request(Operation.CREATE, obj, user=user, version="v1alpha1"), context())
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.reason, decision.message) == (
            "packages.revision-number",
            403,
            "Forbidden",
            message,
        )


REVISION_UPDATE = [
    ("Draft", None, None, ALICE, None),
    ("Draft", None, 0, ALICE, None),
    ("Draft", 0, None, ALICE, None),
    ("Proposed", 2, 2, ALICE, None),
    ("Draft", None, 7, ALICE, REV_UPDATE_MSG.format(0, 7)),
    ("Proposed", 0, 7, ALICE, REV_UPDATE_MSG.format(0, 7)),
    ("Proposed", 2, None, ALICE, REV_UPDATE_MSG.format(2, 0)),
    ("Proposed", 0, 7, ADMIN, REV_UPDATE_MSG.format(0, 7)),
    ("Proposed", 0, 7, CONTROLLER, None),
    ("Proposed", 0, 7, WARDEN, None),
]


@pytest.mark.parametrize(("lifecycle", "old", "new", "user", "message"), REVISION_UPDATE)
def test_revision_number_on_update(lifecycle: str, old: int | None, new: int | None, user, message: str | None) -> None:
    """A plain v1alpha1 update would otherwise write status.revision past the status subresource."""
    before = revision(lifecycle, version="v1alpha1", revision=old)
    after = revision(lifecycle, version="v1alpha1", revision=new)
    result = validate(request(Operation.UPDATE, after, before, user=user, version="v1alpha1"), context())
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.message) == ("packages.revision-number", 403, message)


def test_a_published_revision_number_is_part_of_the_frozen_spec() -> None:
    before = revision("Published", version="v1alpha1", revision=2)
    after = revision("Published", version="v1alpha1", revision=9)
    name, decision = validate(request(Operation.UPDATE, after, before, version="v1alpha1"), context())
    assert (name, decision.code) == ("packages.revision-immutable", 422)
    assert "(changed: spec.revision)" in decision.message


def test_v1alpha2_requests_carry_no_revision_in_spec() -> None:
    """status.revision on v1alpha2 is only written through the status subresource (not checked here)."""
    before = revision("Proposed")
    after = changed(before, "status", "revision", value=4)
    assert validate(request(Operation.UPDATE, after, before), context()) is None
