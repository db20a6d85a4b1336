"""The retention plan: every condition alone keeps an entry; age boundary; keep-last ranking; the cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policies.catalog_deletion import CV_PROTECTION_FINALIZER
from policies.families import INDEXES
from policies.kinds import COMPONENT_VERSION, RELEASE
from policies.retention import (
    REFUSED_UNSYNCED,
    RETAIN_LABEL,
    KeepReason,
    RetentionPlan,
    plan,
    semver_key,
)
from policies.sidecar_config import RetentionConfig
from policies.view import MemoryView

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NS = "team-a"
OLD_RED = NOW - timedelta(days=8)


def ts(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def cv(
    name: str,
    *,
    component: str = "demo",
    tag: str = "1.0.0",
    status: str | None = "False",
    since: datetime | None = OLD_RED,
    namespace: str = NS,
    created: str = "2026-01-01T00:00:00Z",
    labels: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
    terminating: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": f"rv-{name}",
        "creationTimestamp": created,
        "labels": labels or {},
        "finalizers": finalizers or [],
    }
    if terminating:
        meta["deletionTimestamp"] = ts(NOW)
    body: dict[str, Any] = {"metadata": meta, "spec": {"tag": tag}}
    if component:
        body["spec"]["componentRef"] = {"name": component}
    if status is not None:
        cond: dict[str, Any] = {"type": "Available", "status": status, "reason": "ArtifactMissing", "message": "m"}
        if since is not None:
            cond["lastTransitionTime"] = ts(since)
        body["status"] = {"conditions": [cond]}
    return body


def release(name: str, target: str, *, namespace: str = NS, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if terminating:
        meta["deletionTimestamp"] = ts(NOW)
    return {"metadata": meta, "spec": {"componentVersionRef": {"name": target, "namespace": NS}}}


def view(cvs: list[dict[str, Any]], releases: list[dict[str, Any]] = ()) -> MemoryView:  # type: ignore[assignment]
    v = MemoryView(INDEXES)
    v.replace(COMPONENT_VERSION, cvs)
    v.replace(RELEASE, releases)
    return v


# keepLast 0 so that only the condition under test decides
LOOSE = RetentionConfig(enabled=True, keepLast=0)


def run(cvs: list[dict[str, Any]], releases: list[dict[str, Any]] = (), **config: Any) -> RetentionPlan:  # type: ignore[assignment]
    return plan(view(cvs, releases), NOW, LOOSE.model_copy(update=config))


def deleted(p: RetentionPlan) -> list[str]:
    return [d.key for d in p.deletions]


def test_red_unreferenced_aged_entry_is_deleted_with_what_it_was_evaluated_at() -> None:
    p = run([cv("old")])
    assert deleted(p) == [f"{NS}/old"]
    d = p.deletions[0]
    assert (d.uid, d.resource_version, d.red_since) == ("uid-old", "rv-old", OLD_RED)
    assert p.kept == {}
    assert d.message(NOW, LOOSE) == (
        "deleted by the retention janitor: Available=False since 2026-11-21T12:00:00Z (192h0m0s, at least 168h0m0s), "
        "no live Release references it, not among the newest 0 of Component team-a/demo; "
        'label it catalog-warden.io/retain="true" to keep such an entry'
    )
    assert d.message(NOW, LOOSE, dry_run=True).startswith("would be deleted by the retention janitor: ")


KEPT_ALONE = [
    pytest.param([cv("x", terminating=True)], [], {}, KeepReason.TERMINATING, id="terminating"),
    pytest.param([cv("x", status="True")], [], {}, KeepReason.NOT_RED, id="green"),
    pytest.param([cv("x", status="Unknown")], [], {}, KeepReason.NOT_RED, id="unknown"),
    pytest.param([cv("x", status=None)], [], {}, KeepReason.NOT_RED, id="never-checked"),
    pytest.param([cv("x", since=NOW - timedelta(days=1))], [], {}, KeepReason.RED_TOO_RECENT, id="young"),
    pytest.param([cv("x", since=None)], [], {}, KeepReason.RED_TOO_RECENT, id="no-transition-time"),
    pytest.param([cv("x", labels={RETAIN_LABEL: "true"})], [], {}, KeepReason.RETAINED, id="retain-label"),
    pytest.param([cv("x")], [], {"excludedNamespaces": (NS,)}, KeepReason.EXCLUDED_NAMESPACE, id="excluded-ns"),
    pytest.param([cv("x", finalizers=[CV_PROTECTION_FINALIZER])], [], {}, KeepReason.PROTECTED, id="finalizer"),
    pytest.param(
        [cv("x", finalizers=["solar.opendefense.cloud/component-ref"])],
        [],
        {},
        KeepReason.PROTECTED,
        id="any-solar-protection-finalizer",
    ),
    pytest.param([cv("x")], [release("r", "x")], {}, KeepReason.REFERENCED, id="live-release"),
    pytest.param([cv("x")], [release("r", "x", namespace="team-b")], {}, KeepReason.REFERENCED, id="cross-ns-release"),
    pytest.param([cv("x", component="")], [], {}, KeepReason.NO_COMPONENT, id="no-component"),
    pytest.param([cv("x")], [], {"keepLast": 1}, KeepReason.KEEP_LAST, id="keep-last"),
    pytest.param([cv("x")], [], {"maxDeletesPerSweep": 0}, KeepReason.OVER_CAP, id="cap-zero"),
]


@pytest.mark.parametrize(("cvs", "releases", "config", "reason"), KEPT_ALONE)
def test_each_condition_alone_keeps_the_entry(
    cvs: list[dict[str, Any]], releases: list[dict[str, Any]], config: dict[str, Any], reason: KeepReason
) -> None:
    p = run(cvs, releases, **config)
    assert deleted(p) == []
    assert p.kept == {f"{NS}/x": reason}


def test_a_retain_label_other_than_true_does_not_keep() -> None:
    assert deleted(run([cv("x", labels={RETAIN_LABEL: "yes"})])) == [f"{NS}/x"]


def test_terminating_releases_do_not_protect() -> None:
    p = run([cv("x")], [release("r", "x", terminating=True)])
    assert deleted(p) == [f"{NS}/x"]


def test_a_release_of_another_entry_does_not_protect() -> None:
    assert deleted(run([cv("x")], [release("r", "y")])) == [f"{NS}/x"]


@pytest.mark.parametrize(
    ("red_for", "expected"),
    [
        (timedelta(hours=168) - timedelta(seconds=1), []),
        (timedelta(hours=168), [f"{NS}/x"]),
        (timedelta(hours=168) + timedelta(seconds=1), [f"{NS}/x"]),
    ],
    ids=["one-second-short", "exactly-min-age", "one-second-past"],
)
def test_age_boundary_is_inclusive(red_for: timedelta, expected: list[str]) -> None:
    assert deleted(run([cv("x", since=NOW - red_for)])) == expected


def test_a_transition_time_in_the_future_keeps() -> None:
    assert run([cv("x", since=NOW + timedelta(days=1))]).kept == {f"{NS}/x": KeepReason.RED_TOO_RECENT}


def test_keep_last_ranks_by_semver_not_by_text_or_creation() -> None:
    # text order would put 1.10.0 below 1.9.0; creation order is the reverse of semver here
    tags = ["1.2.0", "1.9.0", "1.10.0", "v2.0.0-rc.1", "v2.0.0", "1.10.0-alpha"]
    cvs = [cv(f"cv-{i}", tag=t, created=f"2026-0{9 - i}-01T00:00:00Z") for i, t in enumerate(tags)]
    p = run(cvs, keepLast=3)
    assert sorted(k for k, r in p.kept.items() if r is KeepReason.KEEP_LAST) == [
        f"{NS}/cv-2",  # 1.10.0
        f"{NS}/cv-3",  # v2.0.0-rc.1
        f"{NS}/cv-4",  # v2.0.0
    ]
    assert sorted(deleted(p)) == [f"{NS}/cv-0", f"{NS}/cv-1", f"{NS}/cv-5"]


def test_keep_last_counts_green_entries_and_ignores_terminating_ones() -> None:
    cvs = [
        cv("green-new", tag="3.0.0", status="True"),
        cv("gone", tag="4.0.0", terminating=True),
        cv("red-mid", tag="2.0.0"),
        cv("red-old", tag="1.0.0"),
    ]
    p = run(cvs, keepLast=2)
    assert p.kept[f"{NS}/red-mid"] is KeepReason.KEEP_LAST
    assert deleted(p) == [f"{NS}/red-old"]


def test_keep_last_is_per_component() -> None:
    cvs = [
        cv("a1", component="a", tag="1.0.0"),
        cv("b1", component="b", tag="1.0.0"),
        cv("b0", component="b", tag="0.1.0"),
    ]
    p = run(cvs, keepLast=1)
    assert deleted(p) == [f"{NS}/b0"]
    assert p.kept == {f"{NS}/a1": KeepReason.KEEP_LAST, f"{NS}/b1": KeepReason.KEEP_LAST}


def test_non_semver_tags_rank_below_semver_and_among_themselves_by_creation() -> None:
    cvs = [
        cv("snap-new", tag="nightly", created="2026-10-01T00:00:00Z"),
        cv("snap-old", tag="latest-build", created="2026-02-01T00:00:00Z"),
        cv("release", tag="0.0.1", created="2026-01-01T00:00:00Z"),
    ]
    p = run(cvs, keepLast=2)
    assert p.kept == {f"{NS}/release": KeepReason.KEEP_LAST, f"{NS}/snap-new": KeepReason.KEEP_LAST}
    assert deleted(p) == [f"{NS}/snap-old"]


def test_equal_semver_falls_back_to_creation_time() -> None:
    cvs = [
        cv("build-a", tag="1.0.0+a", created="2026-03-01T00:00:00Z"),
        cv("build-b", tag="1.0.0+b", created="2026-04-01T00:00:00Z"),
    ]
    p = run(cvs, keepLast=1)
    assert deleted(p) == [f"{NS}/build-a"]


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.0.0-alpha", "1.0.0"),
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),
        ("1.0.0-rc.1", "1.0.0"),
        ("1.9.0", "1.10.0"),
        ("v1.0.0", "1.0.1"),
    ],
)
def test_semver_precedence(lower: str, higher: str) -> None:
    low, high = semver_key(lower), semver_key(higher)
    assert low is not None and high is not None
    assert low < high


@pytest.mark.parametrize("tag", ["latest", "1.0", "01.0.0", "1.0.0-", "1.0.0+", ""])
def test_not_semver(tag: str) -> None:
    assert semver_key(tag) is None


def test_cap_takes_the_longest_red_first_and_defers_the_rest() -> None:
    cvs = [cv(f"x{i}", tag=f"1.0.{i}", since=OLD_RED - timedelta(days=i)) for i in range(5)]
    p = run(cvs, maxDeletesPerSweep=2)
    assert deleted(p) == [f"{NS}/x4", f"{NS}/x3"]
    assert p.kept == {f"{NS}/x{i}": KeepReason.OVER_CAP for i in range(3)}


def test_equal_red_times_are_ordered_by_name() -> None:
    p = run([cv("b"), cv("a"), cv("c")])
    assert deleted(p) == [f"{NS}/a", f"{NS}/b", f"{NS}/c"]


def test_an_unsynced_view_plans_nothing() -> None:
    v = view([cv("x")])
    v.mark_synced(False)
    p = plan(v, NOW, LOOSE)
    assert (p.deletions, p.refused) == ((), REFUSED_UNSYNCED)


def test_defaults_are_safe() -> None:
    config = RetentionConfig()
    assert (config.enabled, config.dryRun, config.keepLast, config.maxDeletesPerSweep) == (False, False, 3, 50)
    assert config.minRedAge == timedelta(hours=168)
    assert RetentionConfig.model_validate({"minRedAge": "72h", "interval": "30m"}).minRedAge == timedelta(hours=72)


def _malformed(path: tuple[str, ...], value: object) -> dict[str, Any]:
    bad = cv("bad")
    target: Any = bad
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return bad


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        pytest.param(_malformed(("metadata", "labels"), "retain"), KeepReason.RETAINED, id="labels-a-string"),
        pytest.param(
            _malformed(("status", "conditions", 0, "lastTransitionTime"), "2026-01-01T00:00:00"),  # type: ignore[arg-type]
            KeepReason.RED_TOO_RECENT,
            id="transition-time-without-zone",
        ),
    ],
)
def test_a_malformed_entry_is_kept_and_the_sweep_goes_on(bad: dict[str, Any], reason: KeepReason) -> None:
    # unreadable retention facts keep the entry (fail-closed); the other entries are still planned
    p = run([bad, cv("good", component="other")])
    assert deleted(p) == [f"{NS}/good"]
    assert p.kept == {f"{NS}/bad": reason}


@pytest.mark.parametrize(
    "metadata",
    [
        "bad",
        {"name": "bad", "namespace": NS, "resourceVersion": "rv-bad"},
        {"name": "bad", "namespace": NS, "uid": "uid-bad"},
    ],
    ids=["a-string", "no-uid", "no-resource-version"],
)
def test_an_entry_without_readable_preconditions_is_kept_and_the_sweep_goes_on(metadata: object) -> None:
    bad = cv("bad")
    bad["metadata"] = metadata
    p = run([bad, cv("good", component="other")])
    assert deleted(p) == [f"{NS}/good"]
    assert list(p.kept.values()) == [KeepReason.UNREADABLE]


@pytest.mark.parametrize("metadata", ["bad", None], ids=["a-string", "null"])
def test_a_release_with_malformed_metadata_counts_as_live(metadata: object) -> None:
    r = release("r", "x")
    r["metadata"] = metadata
    p = run([cv("x"), cv("y", component="other")], [r])
    assert p.kept == {f"{NS}/x": KeepReason.REFERENCED}
    assert deleted(p) == [f"{NS}/y"]
