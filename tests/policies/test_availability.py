"""The availability state machine: every outcome against every prior state, thresholds, recovery, writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policies.artifacts import DIGEST_LABEL, ArtifactRef, Unresolved, UnresolvedReason
from policies.availability import (
    CHECK_FAILED_WHAT,
    MSG_CHECK_FAILED,
    Availability,
    Check,
    Outcome,
    Thresholds,
    decide,
    go_duration,
    status_changed,
)
from policies.registry_credentials import CheckedWith

NOW = datetime(2026, 11, 29, 12, 30, 5, tzinfo=UTC)
NOW_S = "2026-11-29T12:30:05Z"
EARLIER = "2026-11-29T12:00:00Z"  # 30 minutes before NOW: past the default grace
RECENT = "2026-11-29T12:28:05Z"  # 2 minutes before NOW: inside the default grace
GREEN_SINCE = "2026-11-01T08:00:00Z"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
REF = ArtifactRef("reg.example:5000", "ocm/component-descriptors/example.com/demo", "1.0.0")
ART = "reg.example:5000/ocm/component-descriptors/example.com/demo:1.0.0"
FAILURES = [o for o in Outcome if o not in (Outcome.FOUND, Outcome.NOT_FOUND)]


def cv(cond: dict[str, Any] | None = None, availability: dict[str, Any] | None = None, **labels: str) -> dict:
    obj: dict[str, Any] = {"metadata": {"name": "demo-1-0-0", "namespace": "team-a", "generation": 4}, "spec": {}}
    if labels:
        obj["metadata"]["labels"] = {DIGEST_LABEL: labels["digest"]}
    status: dict[str, Any] = {}
    if cond is not None:
        status["conditions"] = [{"type": "Available", "observedGeneration": 4, **cond}]
    if availability is not None:
        status["availability"] = availability
    if status:
        obj["status"] = status
    return obj


def cond(status: str, reason: str, message: str, since: str) -> dict[str, Any]:
    return {
        "type": "Available",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": 4,
    }


RESOLVED_D1 = f"{ART} resolves to {D1}"
PENDING_1 = (
    f"{ART} not found (1 of 3 misses since {NOW_S}); Available turns False after 3 misses and 10m0s since the first"
)
PENDING_2_RECENT = (
    f"{ART} not found (2 of 3 misses since {RECENT}); Available turns False after 3 misses and 10m0s since the first"
)
PENDING_3_RECENT = (
    f"{ART} not found (3 of 3 misses since {RECENT}); Available turns False after 3 misses and 10m0s since the first"
)
MISSING_EARLIER = (
    f"{ART} not found since {EARLIER} (3 consecutive misses); "
    "push the artifact again to turn the entry green, or delete the ComponentVersion"
)


def failed(outcome: Outcome) -> str:
    return f"{ART} could not be checked: {CHECK_FAILED_WHAT[outcome]}; Available stays Unknown until a check answers"


# Prior states: (condition, availability).
FRESH = cv()
GREEN = cv(cond("True", "ArtifactResolved", RESOLVED_D1, GREEN_SINCE), {"consecutiveMisses": 0, "resolvedDigest": D1})
PENDING = cv(
    cond("Unknown", "Pending", PENDING_2_RECENT, RECENT),
    {"consecutiveMisses": 2, "firstMissAt": RECENT, "resolvedDigest": D1},
)
PENDING_OLD_RUN = cv(
    cond("Unknown", "Pending", "x", EARLIER),
    {"consecutiveMisses": 2, "firstMissAt": EARLIER, "resolvedDigest": D1},
)
RED = cv(
    cond("False", "ArtifactMissing", MISSING_EARLIER, "2026-11-29T12:10:00Z"),
    {"consecutiveMisses": 3, "firstMissAt": EARLIER, "resolvedDigest": D1},
)
FAILING = cv(
    cond("Unknown", "CheckFailed", failed(Outcome.TIMEOUT), EARLIER),
    {"consecutiveMisses": 1, "firstMissAt": EARLIER, "resolvedDigest": D1},
)


def avail(misses: int, first: str | None = None, digest: str = D1) -> dict[str, Any]:
    out: dict[str, Any] = {"consecutiveMisses": misses, "lastCheckedAt": NOW_S}
    if first:
        out["firstMissAt"] = first
    if digest:
        out["resolvedDigest"] = digest
    return out


# --- FOUND and NOT_FOUND from every prior state ----------------------------------------------------

TABLE = [
    # (name, prior, check, expected condition, expected availability)
    ("fresh found", FRESH, Check.found(REF, D1), cond("True", "ArtifactResolved", RESOLVED_D1, NOW_S), avail(0)),
    ("green found", GREEN, Check.found(REF, D1), cond("True", "ArtifactResolved", RESOLVED_D1, GREEN_SINCE), avail(0)),
    ("pending found", PENDING, Check.found(REF, D1), cond("True", "ArtifactResolved", RESOLVED_D1, NOW_S), avail(0)),
    ("red returns", RED, Check.found(REF, D1), cond("True", "ArtifactResolved", RESOLVED_D1, NOW_S), avail(0)),
    ("failing found", FAILING, Check.found(REF, D1), cond("True", "ArtifactResolved", RESOLVED_D1, NOW_S), avail(0)),
    (
        "fresh miss",
        FRESH,
        Check.missing(REF),
        cond("Unknown", "Pending", PENDING_1, NOW_S),
        avail(1, NOW_S, digest=""),
    ),
    ("green miss", GREEN, Check.missing(REF), cond("Unknown", "Pending", PENDING_1, NOW_S), avail(1, NOW_S)),
    (
        "pending third miss inside grace",
        PENDING,
        Check.missing(REF),
        cond("Unknown", "Pending", PENDING_3_RECENT, RECENT),
        avail(3, RECENT),
    ),
    (
        "pending third miss past grace",
        PENDING_OLD_RUN,
        Check.missing(REF),
        cond("False", "ArtifactMissing", MISSING_EARLIER, NOW_S),
        avail(3, EARLIER),
    ),
    (
        "red stays red",
        RED,
        Check.missing(REF),
        cond("False", "ArtifactMissing", MISSING_EARLIER, "2026-11-29T12:10:00Z"),
        avail(3, EARLIER),
    ),
    (
        "a failure in between does not restart the run",
        FAILING,
        Check.missing(REF),
        cond(
            "Unknown",
            "Pending",
            f"{ART} not found (2 of 3 misses since {EARLIER}); "
            "Available turns False after 3 misses and 10m0s since the first",
            EARLIER,  # Unknown before and after: the reason changes, the transition time does not
        ),
        avail(2, EARLIER),
    ),
]


@pytest.mark.parametrize(("name", "prior", "check", "want_cond", "want_avail"), TABLE, ids=[t[0] for t in TABLE])
def test_found_and_missing_table(name, prior, check, want_cond, want_avail):
    verdict = decide(prior, check, NOW)
    assert verdict.condition == want_cond
    assert verdict.availability.to_status() == want_avail


# --- every failure outcome from every prior state: Unknown, misses untouched, never False ----------

PRIORS = {"fresh": FRESH, "green": GREEN, "pending": PENDING, "red": RED, "failing": FAILING}


@pytest.mark.parametrize("outcome", FAILURES)
@pytest.mark.parametrize("prior_name", PRIORS)
def test_failures_give_unknown_and_keep_the_miss_count(prior_name, outcome):
    prior = PRIORS[prior_name]
    verdict = decide(prior, Check.failed(REF, outcome), NOW)
    old_cond = (prior.get("status") or {}).get("conditions", [{}])[0]
    since = old_cond["lastTransitionTime"] if old_cond.get("status") == "Unknown" else NOW_S
    assert verdict.condition == cond("Unknown", "CheckFailed", failed(outcome), since)
    old = Availability.of(prior)
    assert verdict.availability == Availability(old.consecutive_misses, old.first_miss_at, NOW, old.resolved_digest)


def test_failure_detail_and_unresolved_wording():
    verdict = decide(GREEN, Check.failed(REF, Outcome.SERVER_ERROR, "HTTP 503"), NOW)
    assert verdict.condition["message"] == (
        f"{ART} could not be checked: the registry answered with a server error (HTTP 503); "
        "Available stays Unknown until a check answers"
    )
    why = Unresolved("team-a/demo-1-0-0", UnresolvedReason.COMPONENT_MISSING, "Component team-a/demo does not exist")
    verdict = decide(GREEN, Check.unresolved(why), NOW)
    assert verdict.condition["message"] == (
        "the artifact of ComponentVersion team-a/demo-1-0-0 could not be checked: its coordinates are unresolved "
        "(Component team-a/demo does not exist); Available stays Unknown until a check answers"
    )
    with pytest.raises(ValueError, match="Found is not a failed check"):
        Check.failed(REF, Outcome.FOUND)


# --- thresholds --------------------------------------------------------------------------------------


def run_misses(count: int, step: timedelta, thresholds: Thresholds, start: datetime = NOW) -> list[str]:
    """Feed ``count`` 404s ``step`` apart into one entry, applying each verdict; the statuses seen."""
    obj = cv()
    seen = []
    for i in range(count):
        verdict = decide(obj, Check.missing(REF), start + i * step, thresholds)
        obj = {**obj, "status": verdict.apply(obj.get("status"))}
        seen.append(verdict.condition["status"])
    return seen


@pytest.mark.parametrize(
    ("misses", "grace", "step", "count", "expected"),
    [
        # N boundary: grace already over at the N-th miss, False exactly at the N-th.
        (3, timedelta(0), timedelta(minutes=5), 4, ["Unknown", "Unknown", "False", "False"]),
        (1, timedelta(0), timedelta(minutes=5), 2, ["False", "False"]),
        # Grace boundary: N reached early, False at the first miss with now - first >= grace (not before).
        (3, timedelta(minutes=10), timedelta(minutes=5), 4, ["Unknown", "Unknown", "False", "False"]),
        (3, timedelta(minutes=10), timedelta(minutes=4), 4, ["Unknown", "Unknown", "Unknown", "False"]),
        (2, timedelta(minutes=10), timedelta(seconds=599), 3, ["Unknown", "Unknown", "False"]),
    ],
)
def test_false_needs_both_misses_and_grace(misses, grace, step, count, expected):
    assert run_misses(count, step, Thresholds(misses, grace)) == expected


def test_grace_is_inclusive_to_the_second():
    thresholds = Thresholds(2, timedelta(minutes=10))
    first = decide(cv(), Check.missing(REF), NOW, thresholds)
    after_one = {**cv(), "status": first.apply(None)}
    just_before = decide(after_one, Check.missing(REF), NOW + timedelta(minutes=10) - timedelta(seconds=1), thresholds)
    exactly = decide(after_one, Check.missing(REF), NOW + timedelta(minutes=10), thresholds)
    assert (just_before.condition["status"], exactly.condition["status"]) == ("Unknown", "False")


def test_unknown_never_becomes_false_without_404s():
    obj = RED
    for i, outcome in enumerate(FAILURES * 3):
        verdict = decide(obj, Check.failed(REF, outcome), NOW + timedelta(minutes=i), Thresholds(1, timedelta(0)))
        assert verdict.condition["status"] == "Unknown"
        obj = {**obj, "status": verdict.apply(obj["status"])}
    assert Availability.of(obj).consecutive_misses == 3


def test_recovery_then_a_new_run_starts_from_zero():
    back = decide(RED, Check.found(REF, D2), NOW)
    assert back.condition == cond("True", "ArtifactResolved", f"{ART} resolves to {D2}", NOW_S)
    assert back.availability == Availability(0, None, NOW, D2)
    green = {**RED, "status": back.apply(RED["status"])}
    later = NOW + timedelta(hours=1)
    again = decide(green, Check.missing(REF), later)
    assert again.availability == Availability(1, later, later, D2)
    assert again.condition["status"] == "Unknown"


def test_found_without_a_digest_keeps_the_last_known_one():
    verdict = decide(GREEN, Check.found(REF, None), NOW)
    assert verdict.availability.resolved_digest == D1
    assert verdict.condition["message"] == f"{ART} resolves to an unreported digest"


def test_a_tag_pushed_again_stays_green_and_says_so():
    label = "1" * 63
    verdict = decide(cv(digest=label), Check.found(REF, D2), NOW)
    assert verdict.condition == cond(
        "True",
        "ArtifactResolved",
        f"{ART} resolves to {D2}, not to the manifest of label {DIGEST_LABEL}={label}: the tag was pushed again",
        NOW_S,
    )
    assert decide(cv(digest=label), Check.found(REF, D1), NOW).condition["message"] == RESOLVED_D1


def test_observed_generation_follows_metadata():
    obj = cv()
    obj["metadata"]["generation"] = 9
    assert decide(obj, Check.found(REF, D1), NOW).condition["observedGeneration"] == 9
    del obj["metadata"]["generation"]
    assert "observedGeneration" not in decide(obj, Check.found(REF, D1), NOW).condition


# --- writes: only on change; lastCheckedAt alone is no change ---------------------------------------


@pytest.mark.parametrize(
    ("prior", "check"),
    [
        (GREEN, Check.found(REF, D1)),
        (RED, Check.missing(REF)),
        (FAILING, Check.failed(REF, Outcome.TIMEOUT)),
    ],
    ids=["green", "red", "failing"],
)
def test_a_steady_state_writes_nothing(prior, check):
    later = NOW + timedelta(hours=3)
    verdict = decide(prior, check, later)
    assert verdict.availability.last_checked_at == later
    assert not status_changed(prior["status"], verdict.apply(prior["status"]))
    assert not status_changed(prior["status"], verdict.status_fragment())


@pytest.mark.parametrize(
    ("prior", "check"),
    [
        (FRESH, Check.found(REF, D1)),
        (GREEN, Check.found(REF, D2)),
        (GREEN, Check.missing(REF)),
        (PENDING, Check.missing(REF)),
        (RED, Check.found(REF, D1)),
        (GREEN, Check.failed(REF, Outcome.UNAUTHORIZED)),
        (FAILING, Check.failed(REF, Outcome.FORBIDDEN)),
    ],
)
def test_every_transition_is_a_write(prior, check):
    verdict = decide(prior, check, NOW)
    assert status_changed(prior.get("status"), verdict.apply(prior.get("status")))


def test_generation_change_is_a_write():
    bumped = {**GREEN, "metadata": {**GREEN["metadata"], "generation": 5}}
    assert status_changed(GREEN["status"], decide(bumped, Check.found(REF, D1), NOW).apply(GREEN["status"]))


def test_apply_keeps_other_conditions_in_place():
    other = {"type": "Renderable", "status": "True", "reason": "Ok", "message": "", "lastTransitionTime": EARLIER}
    status = {"conditions": [other, GREEN["status"]["conditions"][0]], "extra": 1}
    out = decide(GREEN, Check.missing(REF), NOW).apply(status)
    assert [c["type"] for c in out["conditions"]] == ["Renderable", "Available"]
    assert out["conditions"][0] is other
    assert out["extra"] == 1
    assert status["conditions"][1]["status"] == "True"  # the input is not mutated


def test_thresholds_are_checked():
    with pytest.raises(ValueError, match="misses must be at least 1"):
        Thresholds(0)
    with pytest.raises(ValueError, match="grace must not be negative"):
        Thresholds(3, timedelta(seconds=-1))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(minutes=10), "10m0s"),
        (timedelta(hours=1), "1h0m0s"),
        (timedelta(seconds=1.5), "1.5s"),
    ],
)
def test_go_duration(value, text):
    assert go_duration(value) == text


# --- how the lookup was authenticated (tenancy) ----------------------------------------------

ANONYMOUS = CheckedWith(
    "checked anonymously: no Registry for reg.example:5000 in namespace team-a or granted to it", True
)
WITH_SECRET = CheckedWith("checked with Secret team-a/creds of Registry team-a/reg", False)


@pytest.mark.parametrize(
    "check",
    [
        Check.found(REF, D1, ANONYMOUS),
        Check.missing(REF, ANONYMOUS),
        *(Check.failed(REF, o, "HTTP 401", ANONYMOUS) for o in (Outcome.UNAUTHORIZED, Outcome.SERVER_ERROR)),
    ],
    ids=lambda c: str(c.outcome),
)
def test_every_lookup_records_its_credentials_and_a_second_identical_pass_writes_nothing(check: Check) -> None:
    held = Thresholds(misses=1, grace=timedelta(0))  # a miss is then a steady state too
    first = decide(cv(), check, NOW, held).apply(None)
    assert first["availability"]["credentials"] == ANONYMOUS.text
    again = decide({**cv(), "status": first}, check, NOW + timedelta(minutes=5), held).apply(first)
    assert not status_changed(first, again)


def test_a_change_of_credentials_is_a_write_and_no_lookup_keeps_what_was_recorded() -> None:
    first = decide(cv(), Check.found(REF, D1, ANONYMOUS), NOW).apply(None)
    granted = decide({**cv(), "status": first}, Check.found(REF, D1, WITH_SECRET), NOW).apply(first)
    assert granted["availability"]["credentials"] == WITH_SECRET.text and status_changed(first, granted)
    for no_lookup in (Check.failed(REF, Outcome.PARTIAL_SCAN), Check.found(REF, D1)):
        kept = decide({**cv(), "status": granted}, no_lookup, NOW).apply(granted)
        assert kept["availability"]["credentials"] == WITH_SECRET.text


@pytest.mark.parametrize(
    ("outcome", "credentials", "detail"),
    [
        (Outcome.UNAUTHORIZED, ANONYMOUS, f" (HTTP 401; {ANONYMOUS.text})"),
        (Outcome.FORBIDDEN, ANONYMOUS, f" (HTTP 401; {ANONYMOUS.text})"),
        (Outcome.UNAUTHORIZED, WITH_SECRET, " (HTTP 401)"),
        (Outcome.SERVER_ERROR, ANONYMOUS, " (HTTP 401)"),
        (Outcome.UNAUTHORIZED, None, " (HTTP 401)"),
    ],
)
def test_an_anonymous_refusal_says_no_credentials_were_sent(
    outcome: Outcome, credentials: CheckedWith | None, detail: str
) -> None:
    verdict = decide(cv(), Check.failed(REF, outcome, "HTTP 401", credentials), NOW)
    assert verdict.condition["message"] == MSG_CHECK_FAILED.format(
        artifact=ART, what=CHECK_FAILED_WHAT[outcome], detail=detail
    )
