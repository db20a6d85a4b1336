"""PackageRevision lifecycle at admission: the creation set and all 16 from/to pairs."""

from __future__ import annotations

import pytest

from policies.model import Operation
from policies.packages import TRANSITIONS, Lifecycle
from tests.policies.test_packages_support import (
    ADMIN,
    ALICE,
    CONTROLLER,
    WARDEN,
    changed,
    context,
    repository,
    request,
    revision,
    validate,
)

D, P, PUB, DP = "Draft", "Proposed", "Published", "DeletionProposed"

# (from, to, denial message or None). The 16 pairs, written out rather than derived from
# TRANSITIONS so the table in the code is checked against an independent statement of seed 003.
PAIRS = [
    (D, D, None),
    (D, P, None),
    (D, PUB, "spec.lifecycle cannot change from Draft to Published (allowed from Draft: Proposed); "
     "propose it first (spec.lifecycle: Proposed)"),
    (D, DP, "spec.lifecycle cannot change from Draft to DeletionProposed (allowed from Draft: Proposed); "
     "propose it first (spec.lifecycle: Proposed)"),
    (P, D, None),
    (P, P, None),
    (P, PUB, None),
    (P, DP, "spec.lifecycle cannot change from Proposed to DeletionProposed (allowed from Proposed: Published, "
     "Draft); a Proposed revision is not published: delete it or move it back to Draft"),
    (PUB, D, "spec.lifecycle cannot change from Published to Draft (allowed from Published: DeletionProposed); "
     "published content is final: create a new Draft revision with spec.source.copyFrom"),
    (PUB, P, "spec.lifecycle cannot change from Published to Proposed (allowed from Published: DeletionProposed); "
     "published content is final: create a new Draft revision with spec.source.copyFrom"),
    (PUB, PUB, None),
    (PUB, DP, None),
    (DP, D, "spec.lifecycle cannot change from DeletionProposed to Draft (allowed from DeletionProposed: "
     "Published); published content is final: create a new Draft revision with spec.source.copyFrom"),
    (DP, P, "spec.lifecycle cannot change from DeletionProposed to Proposed (allowed from DeletionProposed: "
     "Published); published content is final: create a new Draft revision with spec.source.copyFrom"),
    (DP, PUB, None),
    (DP, DP, None),
]  # fmt: skip


def test_the_table_covers_every_pair_once() -> None:
    assert sorted((a, b) for a, b, _ in PAIRS) == sorted((a.value, b.value) for a in Lifecycle for b in Lifecycle)
    allowed_moves = {(a, b) for a, b, msg in PAIRS if msg is None and a != b}
    assert allowed_moves == {(a.value, b.value) for a, targets in TRANSITIONS.items() for b in targets}


@pytest.mark.parametrize(("old", "new", "message"), PAIRS, ids=[f"{a}->{b}" for a, b, _ in PAIRS])
@pytest.mark.parametrize("user", [ALICE, CONTROLLER, WARDEN], ids=["user", "controller", "warden"])
def test_update_transition(old: str, new: str, message: str | None, user) -> None:
    before = revision(old)
    req = request(Operation.UPDATE, changed(before, "spec", "lifecycle", value=new), before, user=user)
    result = validate(req, context(repository()))
    if message is None:
        assert result is None
    else:
        assert result is not None
        name, decision = result
        assert name == "packages.revision-lifecycle"
        assert (decision.code, decision.reason, decision.message) == (403, "Forbidden", message)


@pytest.mark.parametrize(
    ("old", "new"),
    [(None, "Proposed"), ("", "Proposed"), ("Proposed", ""), ("Draft", None)],
    ids=["absent->Proposed", "empty->Proposed", "Proposed->empty", "Draft->absent"],
)
def test_an_empty_lifecycle_counts_as_draft(old: str | None, new: str | None) -> None:
    req = request(Operation.UPDATE, revision(new), revision(old))
    assert validate(req, context()) is None


def test_an_empty_lifecycle_cannot_jump_to_published() -> None:
    req = request(Operation.UPDATE, revision("Published"), revision(""))
    _, decision = validate(req, context())
    assert decision.message == (
        "spec.lifecycle cannot change from Draft to Published (allowed from Draft: Proposed); "
        "propose it first (spec.lifecycle: Proposed)"
    )


def test_an_unknown_lifecycle_is_invalid() -> None:
    req = request(Operation.UPDATE, revision("Final"), revision("Draft"))
    name, decision = validate(req, context())
    assert name == "packages.revision-lifecycle"
    assert (decision.code, decision.reason) == (422, "Invalid")
    assert (
        decision.message
        == "spec.lifecycle 'Final' is not a lifecycle; use one of Draft, Proposed, Published, DeletionProposed"
    )


def test_a_stored_unknown_lifecycle_may_be_repaired() -> None:
    req = request(Operation.UPDATE, revision("Draft"), revision("Final"))
    assert validate(req, context()) is None


MSG_CREATE = (
    "spec.lifecycle {} is not allowed on creation; create the revision as Draft or Proposed "
    "and propose and publish it afterwards"
)


@pytest.mark.parametrize(
    ("lifecycle", "user", "message"),
    [
        (None, ALICE, None),
        ("", ALICE, None),
        ("Draft", ALICE, None),
        ("Proposed", ALICE, None),
        ("Published", ALICE, MSG_CREATE.format("Published")),
        ("DeletionProposed", ALICE, MSG_CREATE.format("DeletionProposed")),
        ("Published", ADMIN, MSG_CREATE.format("Published")),
        ("Published", WARDEN, MSG_CREATE.format("Published")),
        ("Draft", CONTROLLER, None),
        ("Proposed", CONTROLLER, None),
        ("Published", CONTROLLER, None),
        ("DeletionProposed", CONTROLLER, None),
    ],
    ids=lambda v: getattr(v, "username", v),
)
def test_create_lifecycle(lifecycle: str | None, user, message: str | None) -> None:
    req = request(Operation.CREATE, revision(lifecycle), user=user)
    result = validate(req, context(repository()))
    if message is None:
        assert result is None
    else:
        name, decision = result
        assert (name, decision.code, decision.message) == ("packages.revision-lifecycle", 403, message)


@pytest.mark.parametrize("user", [ALICE, CONTROLLER], ids=["user", "controller"])
def test_create_with_unknown_lifecycle_is_invalid_for_everyone(user) -> None:
    name, decision = validate(request(Operation.CREATE, revision("Final"), user=user), context())
    assert (name, decision.code) == ("packages.revision-lifecycle", 422)


def test_discovered_is_decided_by_identity_not_by_a_missing_source() -> None:
    no_source = revision("Published", source=None)
    name, decision = validate(request(Operation.CREATE, no_source), context())
    assert (name, decision.message) == ("packages.revision-lifecycle", MSG_CREATE.format("Published"))
    assert validate(request(Operation.CREATE, revision("Published"), user=CONTROLLER), context()) is None
