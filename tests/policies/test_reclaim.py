"""The reclamation plan: shared digests, kept digests, safety age, cap, managed repositories, refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from policies.reclaim import (
    CONFIRM_ANNOTATION,
    REFUSED_BREAKER,
    REFUSED_INCOMPLETE,
    REFUSED_UNKNOWN_REGISTRY,
    SKIP_AGE_UNKNOWN,
    SKIP_KEPT_DIGEST,
    SKIP_UNKNOWN_DIGEST,
    SKIP_UNMANAGED,
    TRIP_NOT_LISTED,
    TRIP_NOTHING_FOUND,
    Action,
    ActionKind,
    ReclaimMode,
    ReclaimPlan,
    Skip,
    TagInfo,
    TripReason,
    breaker,
    plan,
    plan_fingerprint,
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


# ---- the circuit breaker ----------------------------------------------------------------------

MISSING_REPO = "ocm/component-descriptors/example.com/demo-typo"
SHARE = 0.5


def guarded(listing, referenced=KEPT, cap=100, share=SHARE, confirmed="", approval=None, mode=DELETE) -> ReclaimPlan:
    return breaker(
        run(listing, mode=mode, referenced=referenced, cap=cap), referenced, listing, share, confirmed, approval
    )


def tags(repo: str, *specs: tuple[str, int]) -> dict[str, list[TagInfo]]:
    return {repo: [TagInfo(tag, d(n), OLD) for tag, n in specs]}


# A healthy repository: the kept 1.0.0 and 1.1.0 are there, one old artifact nobody keeps.
HEALTHY = tags(REPO, ("1.0.0", 1), ("1.1.0", 2), ("0.9.0", 3))
MISCONFIGURED = ReferencedSet(1, NOW, {HOST: {MISSING_REPO: Keep(("1.0.0", "1.1.0"))}})
NOT_LISTED = TRIP_NOT_LISTED.format(repository=MISSING_REPO)


@pytest.mark.parametrize(
    ("case", "listing", "referenced", "share", "trips"),
    [
        ("healthy: nothing trips", HEALTHY, KEPT, SHARE, []),
        (
            "a kept repository missing from the catalog",
            {**HEALTHY, GONE_REPO: [TagInfo("2.0.0", d(5), OLD), TagInfo("2.1.0", d(6), OLD)]},
            ReferencedSet(1, NOW, {HOST: {REPO: Keep(("1.0.0",)), MISSING_REPO: Keep(("1.0.0",))}}),
            1.0,
            [(TripReason.UNRESOLVED, MISSING_REPO, NOT_LISTED)],
        ),
        (
            "a kept repository that holds none of its kept tags",
            tags(REPO, ("2.0.0", 4), ("2.1.0", 5), ("2.2.0", 6)),
            KEPT,
            1.0,
            [(TripReason.UNRESOLVED, REPO, TRIP_NOTHING_FOUND.format(repository=REPO, count=2))],
        ),
        (
            "a red entry whose tag is gone while the repository holds other kept artifacts",
            tags(REPO, ("1.0.0", 1), ("0.9.0", 3), ("0.8.0", 4), ("0.7.0", 5)),
            KEPT,
            1.0,
            [],
        ),
        (
            "kept tags gone but a kept digest still listed (the tag moved)",
            tags(REPO, ("latest", 7), ("0.9.0", 3), ("0.8.0", 4)),
            KEPT,
            1.0,
            [],
        ),
        (
            "more than the share of a repository's tags",
            tags(REPO, ("1.0.0", 1), ("0.9.0", 3), ("0.8.0", 4), ("0.7.0", 5)),
            ReferencedSet(1, NOW, {HOST: {REPO: Keep(("1.0.0",))}}),
            SHARE,
            [(TripReason.SHARE, REPO, f"{REPO}: 3 of 4 tag(s) would go, more than reclaim.maxRemovalShare 0.5")],
        ),
        (
            "exactly the share does not trip",
            tags(REPO, ("1.0.0", 1), ("1.1.0", 2), ("0.9.0", 3), ("0.8.0", 4)),
            KEPT,
            SHARE,
            [],
        ),
        (
            "a share of 1 never trips, even for a whole repository",
            {**HEALTHY, GONE_REPO: [TagInfo("2.0.0", d(5), OLD)]},
            KEPT,
            1.0,
            [],
        ),
        (
            "a repository no entry keeps any more is reclaimed whole: more than any share below 1",
            {**HEALTHY, GONE_REPO: [TagInfo("2.0.0", d(5), OLD)]},
            KEPT,
            0.99,
            [
                (
                    TripReason.SHARE,
                    GONE_REPO,
                    f"{GONE_REPO}: 1 of 1 tag(s) would go, more than reclaim.maxRemovalShare 0.99",
                )
            ],
        ),
        (
            "a share of 0 holds any removal",
            HEALTHY,
            KEPT,
            0.0,
            [(TripReason.SHARE, REPO, f"{REPO}: 1 of 3 tag(s) would go, more than reclaim.maxRemovalShare 0")],
        ),
        (
            "the misconfigured Component: both signs, the missing repository first",
            tags(REPO, *[(f"1.0.{i}", i) for i in range(1, 10)]),
            MISCONFIGURED,
            SHARE,
            [
                (TripReason.UNRESOLVED, MISSING_REPO, NOT_LISTED),
                (TripReason.SHARE, REPO, f"{REPO}: 9 of 9 tag(s) would go, more than reclaim.maxRemovalShare 0.5"),
            ],
        ),
    ],
)
def test_the_breaker_trips_on_signs_of_a_misconfiguration(case, listing, referenced, share, trips):
    result = guarded(listing, referenced=referenced, share=share)
    assert [(t.reason, t.repository, t.message) for t in result.trips] == trips, case
    if trips:
        assert result.actions == () and result.deferred == len(result.candidates) > 0, case
        assert result.refused == REFUSED_BREAKER.format(
            registry=HOST,
            count=len(result.candidates),
            annotation=CONFIRM_ANNOTATION,
            fingerprint=result.fingerprint,
            trips="; ".join(t[2] for t in trips),
        ), case
    else:
        assert (result.refused, result.fingerprint) == ("", ""), case
        assert result.actions == result.candidates != (), case


def test_the_refusal_message_names_the_registry_the_fingerprint_and_the_way_out():
    listing = tags(REPO, ("1.0.0", 1), ("0.9.0", 3), ("0.8.0", 4))
    result = guarded(listing, referenced=MISCONFIGURED)
    # pinned: an operator copies it from an Event, so it must not change between processes or releases
    assert result.fingerprint == "e20e406ae464ae52"
    assert result.refused == (
        f"circuit breaker: nothing is reclaimed in {HOST} until an operator confirms this plan of 3 removal(s) "
        f"with the Registry annotation catalog-warden.io/reclaim-confirm={result.fingerprint}: "
        f"{MISSING_REPO} is kept by the referenced set but is not in the registry's catalog "
        "(does a Component map its versions to the wrong repository?); "
        f"{REPO}: 3 of 3 tag(s) would go, more than reclaim.maxRemovalShare 0.5"
    )


def test_many_trips_are_summarised():
    kept = {f"ocm/component-descriptors/example.com/gone{i}": Keep(("1.0.0",)) for i in range(5)}
    result = guarded(HEALTHY, referenced=ReferencedSet(1, NOW, {HOST: {**kept, REPO: Keep(("1.0.0",))}}), share=1.0)
    assert len(result.trips) == 5
    assert result.refused.endswith("; and 2 more")


def test_no_removal_no_breaker():
    """Nothing to remove, nothing to hold: a missing kept repository alone changes nothing."""
    listing = tags(REPO, ("1.0.0", 1))
    referenced = ReferencedSet(1, NOW, {HOST: {REPO: Keep(("1.0.0",)), MISSING_REPO: Keep(("1.0.0",))}})
    result = guarded(listing, referenced=referenced)
    assert result == run(listing, referenced=referenced)
    assert (result.candidates, result.trips, result.refused) == ((), (), "")


@pytest.mark.parametrize(
    "proposed",
    [
        ReclaimPlan(HOST, DELETE, refused="the referenced set is incomplete (x); nothing is reclaimed"),
        ReclaimPlan(HOST, DELETE),
    ],
)
def test_a_refused_or_empty_plan_passes_unchanged(proposed):
    assert breaker(proposed, MISCONFIGURED, {}, SHARE) == proposed


def test_the_confirmed_fingerprint_lets_exactly_that_plan_through():
    listing = tags(REPO, *[(f"1.0.{i}", i) for i in range(1, 6)])
    held = guarded(listing, referenced=MISCONFIGURED)
    assert held.refused and held.actions == ()
    passed = guarded(listing, referenced=MISCONFIGURED, confirmed=held.fingerprint)
    assert (passed.refused, passed.confirmed, passed.fingerprint) == ("", True, held.fingerprint)
    assert passed.actions == held.candidates and len(passed.actions) == 5


@pytest.mark.parametrize(
    ("case", "listing"),
    [
        ("one more artifact to remove", tags(REPO, *[(f"1.0.{i}", i) for i in range(1, 7)])),
        ("one fewer", tags(REPO, *[(f"1.0.{i}", i) for i in range(1, 5)])),
        ("a tag re-pushed at another digest", tags(REPO, ("1.0.1", 9), *[(f"1.0.{i}", i) for i in range(2, 6)])),
    ],
)
def test_a_changed_plan_is_refused_again_with_a_new_fingerprint(case, listing):
    confirmed = guarded(tags(REPO, *[(f"1.0.{i}", i) for i in range(1, 6)]), referenced=MISCONFIGURED).fingerprint
    result = guarded(listing, referenced=MISCONFIGURED, confirmed=confirmed)
    assert result.actions == () and result.refused, case
    assert result.fingerprint != confirmed and f"reclaim-confirm={result.fingerprint}:" in result.refused, case


def test_the_fingerprint_ignores_ages_order_and_time_but_not_registry_or_mode():
    listing = tags(REPO, *[(f"1.0.{i}", i) for i in range(1, 6)])
    first = guarded(listing, referenced=MISCONFIGURED)
    later = {REPO: [TagInfo(t.tag, t.digest, OLDER) for t in reversed(listing[REPO])]}
    assert guarded(later, referenced=MISCONFIGURED).fingerprint == first.fingerprint
    assert plan_fingerprint(HOST, DELETE, first.trips, first.candidates) == first.fingerprint
    assert plan_fingerprint("other.example", DELETE, first.trips, first.candidates) != first.fingerprint
    assert plan_fingerprint(HOST, UNTAG, first.trips, first.candidates) != first.fingerprint
    assert len(first.fingerprint) == 16 and int(first.fingerprint, 16) >= 0


def test_a_confirmed_plan_bigger_than_the_cap_goes_on_within_its_approval_and_no_further():
    """The cap leaves part of a confirmed plan for later passes: the rest goes without a new
    confirmation (it is within what was confirmed); anything new is held again."""
    listing = tags(REPO, *[(f"1.0.{i}", i) for i in range(1, 6)])
    held = guarded(listing, referenced=MISCONFIGURED, cap=2)
    first = guarded(listing, referenced=MISCONFIGURED, cap=2, confirmed=held.fingerprint)
    assert (first.confirmed, [a.reference for a in first.actions], first.deferred) == (True, [d(1), d(2)], 3)
    approval = first.approval()

    rest = {REPO: [t for t in listing[REPO] if t.digest not in (d(1), d(2))]}
    second = guarded(rest, referenced=MISCONFIGURED, cap=2, confirmed=held.fingerprint, approval=approval)
    assert second.fingerprint != held.fingerprint, "the rest is another plan..."
    assert (second.confirmed, [a.reference for a in second.actions]) == (True, [d(3), d(4)]), "...within the approval"

    grown = {REPO: [*rest[REPO], TagInfo("1.0.9", d(9), OLD)]}
    third = guarded(grown, referenced=MISCONFIGURED, cap=2, confirmed=held.fingerprint, approval=approval)
    assert third.actions == () and third.refused, "a removal nobody confirmed is held"
