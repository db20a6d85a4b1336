"""The reclamation plan: shared digests, kept digests, safety age, cap, managed repositories, refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from policies.reclaim import (
    REFUSED_INCOMPLETE,
    REFUSED_UNKNOWN_REGISTRY,
    SKIP_AGE_UNKNOWN,
    SKIP_KEPT_DIGEST,
    SKIP_UNKNOWN_DIGEST,
    SKIP_UNMANAGED,
    Action,
    ActionKind,
    ReclaimMode,
    ReclaimPlan,
    Skip,
    TagInfo,
    plan,
    reclaim_mode_of,
)
from policies.referenced_set import IncompleteSet, Keep, ReferencedSet

NOW = datetime(2026, 11, 29, 12, 30, 5, tzinfo=UTC)
OLD = NOW - timedelta(days=3)
OLDER = NOW - timedelta(days=5)
YOUNG = NOW - timedelta(hours=1)
AGE = timedelta(hours=24)
HOST = "reg.example:5000"
REPO = "ocm/component-descriptors/example.com/demo"
GONE_REPO = "ocm/component-descriptors/example.com/reaped"


def d(n: int) -> str:
    return "sha256:" + str(n) * 64


KEPT = ReferencedSet(1, NOW, {HOST: {REPO: Keep(("1.0.0", "1.1.0"), (d(7),))}})
DELETE = ReclaimMode.DISTRIBUTION_DELETE
UNTAG = ReclaimMode.ZOT_UNTAG


def run(listing, mode=DELETE, referenced=KEPT, cap=100, age=AGE) -> ReclaimPlan:
    return plan(referenced, HOST, listing, mode, age, cap, NOW)


def test_distribution_deletes_unkept_digests_with_all_their_tags():
    listing = {
        REPO: [
            TagInfo("1.0.0", d(1), OLD),
            TagInfo("0.9.0", d(2), OLD),
            TagInfo("0.9.0-alias", d(2), OLDER),
            TagInfo("0.8.0", d(3), OLDER),
        ]
    }
    result = run(listing)
    assert result.refused == ""
    assert result.actions == (  # oldest first
        Action(ActionKind.DELETE_DIGEST, REPO, d(3), ("0.8.0",), OLDER),
        Action(ActionKind.DELETE_DIGEST, REPO, d(2), ("0.9.0", "0.9.0-alias"), OLD),
    )
    assert result.deferred == 0


def test_never_a_digest_a_kept_tag_shares():
    listing = {REPO: [TagInfo("1.0.0", d(1), OLD), TagInfo("latest", d(1), OLD), TagInfo("0.1.0", d(4), OLD)]}
    result = run(listing)
    assert [a.reference for a in result.actions] == [d(4)]
    assert Skip(REPO, d(1), "a kept tag 1.0.0 shares this digest") in result.skipped


def test_never_a_digest_the_set_keeps():
    listing = {REPO: [TagInfo("0.5.0", d(7), OLD), TagInfo("0.4.0", d(4), OLD)]}
    result = run(listing)
    assert [a.reference for a in result.actions] == [d(4)]
    assert Skip(REPO, d(7), SKIP_KEPT_DIGEST) in result.skipped


def test_an_unknown_digest_skips_the_whole_repository_in_distribution_mode():
    listing = {REPO: [TagInfo("1.0.0", None, OLD), TagInfo("0.1.0", d(4), OLD)]}
    result = run(listing)
    assert result.actions == ()
    assert result.skipped == (Skip(REPO, "", SKIP_UNKNOWN_DIGEST),)


@pytest.mark.parametrize("mode", list(ReclaimMode))
def test_nothing_younger_than_the_safety_age_nor_of_unknown_age(mode):
    listing = {REPO: [TagInfo("0.3.0", d(3), YOUNG), TagInfo("0.2.0", d(2), None), TagInfo("0.1.0", d(1), OLD)]}
    result = run(listing, mode=mode)
    assert [a.tags for a in result.actions] == [("0.1.0",)]
    reasons = {s.reason for s in result.skipped}
    assert reasons == {"younger than the safety age 24h0m0s", SKIP_AGE_UNKNOWN}


def test_the_youngest_tag_on_a_digest_decides_its_age():
    listing = {REPO: [TagInfo("0.2.0", d(2), OLDER), TagInfo("0.2.0-rebuilt", d(2), YOUNG)]}
    assert run(listing).actions == ()


def test_safety_age_boundary():
    exactly = {REPO: [TagInfo("0.1.0", d(1), NOW - AGE)]}
    just_under = {REPO: [TagInfo("0.1.0", d(1), NOW - AGE + timedelta(seconds=1))]}
    assert len(run(exactly).actions) == 1
    assert run(just_under).actions == ()


def test_never_outside_component_descriptor_repositories():
    listing = {
        "charts/demo": [TagInfo("0.1.0", d(1), OLD)],
        "ocm/component-descriptors": [TagInfo("0.1.0", d(2), OLD)],
        REPO: [TagInfo("0.1.0", d(3), OLD)],
    }
    result = run(listing)
    assert [(a.repository, a.reference) for a in result.actions] == [(REPO, d(3))]
    assert Skip("charts/demo", "", SKIP_UNMANAGED) in result.skipped
    assert Skip("ocm/component-descriptors", "", SKIP_UNMANAGED) in result.skipped


def test_a_repository_no_entry_keeps_is_reclaimed_whole():
    result = run({GONE_REPO: [TagInfo("1.0.0", d(5), OLD)]})
    assert result.actions == (Action(ActionKind.DELETE_DIGEST, GONE_REPO, d(5), ("1.0.0",), OLD),)


def test_cap_keeps_the_oldest_and_counts_the_rest():
    listing = {REPO: [TagInfo(f"0.{i}.0", d(i), NOW - timedelta(days=10 - i)) for i in range(1, 6)]}
    result = run(listing, cap=2)
    assert [a.reference for a in result.actions] == [d(1), d(2)]
    assert result.deferred == 3
    assert run(listing, cap=0).actions == ()
    assert run(listing, cap=0).deferred == 5


def test_zot_untags_one_tag_at_a_time_and_never_the_last_tag_on_a_kept_digest():
    listing = {
        REPO: [
            TagInfo("1.0.0", d(1), OLD),
            TagInfo("latest", d(1), OLD),  # shares with a kept tag: untagging it leaves 1.0.0 in place
            TagInfo("0.5.0", d(7), OLD),  # the only tag on a kept digest: zot would reclaim the manifest
            TagInfo("0.4.0", d(4), OLD),
            TagInfo("0.3.0", None, OLD),
        ]
    }
    result = run(listing, mode=UNTAG)
    assert result.actions == (
        Action(ActionKind.UNTAG, REPO, "0.4.0", ("0.4.0",), OLD),
        Action(ActionKind.UNTAG, REPO, "latest", ("latest",), OLD),
    )
    assert Skip(REPO, "0.5.0", SKIP_KEPT_DIGEST) in result.skipped
    assert Skip(REPO, "0.3.0", SKIP_UNKNOWN_DIGEST) in result.skipped


@pytest.mark.parametrize("mode", list(ReclaimMode))
def test_an_incomplete_set_is_refused(mode):
    incomplete = IncompleteSet(NOW, ("ComponentVersion team-a/x: spec.tag is empty",))
    result = run({REPO: [TagInfo("0.1.0", d(1), OLD)]}, mode=mode, referenced=incomplete)
    assert result == ReclaimPlan(
        HOST,
        mode,
        refused="the referenced set is incomplete (ComponentVersion team-a/x: spec.tag is empty); nothing is reclaimed",
    )
    assert REFUSED_INCOMPLETE.startswith("the referenced set is incomplete")


def test_a_set_that_names_nothing_in_this_registry_is_refused():
    result = plan(KEPT, "127.0.0.1:5000", {REPO: [TagInfo("0.1.0", d(1), OLD)]}, DELETE, AGE, 100, NOW)
    assert result.actions == ()
    assert result.refused == REFUSED_UNKNOWN_REGISTRY.format(registry="127.0.0.1:5000")
    assert result.refused == (
        "the referenced set names nothing in registry 127.0.0.1:5000; nothing is reclaimed "
        "(check that Components' spec.registry spells the host as the Registry does)"
    )


def test_the_plan_is_deterministic_whatever_the_listing_order():
    tags = [TagInfo(f"0.{i}.0", d(i), OLD) for i in range(1, 6)]
    assert run({REPO: tags}) == run({REPO: list(reversed(tags))})


@pytest.mark.parametrize(
    ("annotations", "mode"),
    [
        ({"catalog-warden.io/reclaim": "distribution-delete"}, DELETE),
        ({"catalog-warden.io/reclaim": "zot-untag"}, UNTAG),
        ({"catalog-warden.io/reclaim": "yes"}, None),
        ({}, None),
    ],
)
def test_reclaim_mode_from_the_registry_annotation(annotations, mode):
    assert reclaim_mode_of({"metadata": {"name": "r", "annotations": annotations}}) is mode


def test_a_host_spelled_another_way_still_keeps_its_artifacts():
    """Host names are case-insensitive and :443 is https' default port: a Component that spells its
    registry ``Reg.Example`` or ``reg.example:443`` names the same registry, and its artifacts stay."""
    from policies.kinds import COMPONENT, COMPONENT_VERSION
    from policies.referenced_set import compute
    from policies.view import MemoryView

    view = MemoryView(synced=True)
    for ns, host in (("team-a", "Reg.Example"), ("team-b", "reg.example:443"), ("team-c", "reg.example")):
        spec = {"scheme": "https", "registry": host, "repository": f"ocm/example.com/{ns}"}
        view.put(COMPONENT, {"metadata": {"name": f"example-com-{ns}", "namespace": ns}, "spec": spec})
        cv = {"componentRef": {"name": f"example-com-{ns}"}, "tag": "1.0.0"}
        view.put(COMPONENT_VERSION, {"metadata": {"name": "v", "namespace": ns}, "spec": cv})
    referenced = compute(view, 1, NOW)
    repo = "ocm/component-descriptors/example.com/{}".format
    listing = {
        repo(ns): [TagInfo("1.0.0", d(1), OLD), TagInfo("0.1.0", d(2), OLD)] for ns in ("team-a", "team-b", "team-c")
    }
    for registry in ("reg.example", "REG.EXAMPLE:443"):
        result = plan(referenced, registry, listing, DELETE, AGE, 100, NOW)
        assert result.refused == ""
        assert [(a.repository, a.reference) for a in result.actions] == [
            (repo(ns), d(2)) for ns in ("team-a", "team-b", "team-c")
        ], registry
