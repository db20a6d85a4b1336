"""policies.chart_repository_status: every branch of the repository status after an index pass."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policies.chart_repository_status import (
    MSG_FETCH_FAILED,
    MSG_PARTIAL,
    MSG_SYNCED,
    PassOutcome,
    desired_repository_status,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
S0 = "2026-11-29T12:00:00Z"
S1 = "2026-11-29T12:05:00Z"
EARLIER = "2026-11-29T11:00:00Z"


def synced(status: str, reason: str, message: str, since: str = S1) -> dict[str, Any]:
    return {"type": "Synced", "status": status, "reason": reason, "message": message, "lastTransitionTime": since}


TRUE = synced("True", "Synced", MSG_SYNCED)
PARTIAL = synced("False", "PartialSync", MSG_PARTIAL.format(pending=2))
FAILED = synced("False", "SyncFailed", MSG_FETCH_FAILED.format(error="UnexpectedStatus: 503"))
FULL_BEFORE = {
    "lastSuccessfulSyncTime": EARLIER,
    "consecutiveFetchFailures": 0,
    "chartCount": 1,
    "conditions": [synced("True", "Synced", MSG_SYNCED, since=EARLIER)],
}
FAILING_BEFORE = {
    "lastSuccessfulSyncTime": EARLIER,
    "consecutiveFetchFailures": 3,
    "chartCount": 1,
    "conditions": [{**FAILED, "lastTransitionTime": EARLIER}],
}
NEVER_FULL_BEFORE = {
    "consecutiveFetchFailures": 0,
    "chartCount": 1,
    "conditions": [{**PARTIAL, "lastTransitionTime": EARLIER}],
}
OK = PassOutcome(fetched=True, charts=1)
PENDING = PassOutcome(fetched=True, pending=2, charts=1)
FAIL = PassOutcome(fetched=True, failed=True, error="UnexpectedStatus: 503")
NO_FETCH = PassOutcome(fetched=False)


@pytest.mark.parametrize(
    ("previous", "outcome", "expected"),
    [
        pytest.param(
            None,
            OK,
            {"lastSuccessfulSyncTime": S1, "chartCount": 1, "consecutiveFetchFailures": 0, "conditions": [TRUE]},
            id="first-full-pass",
        ),
        pytest.param(
            None,
            PassOutcome(fetched=True, charts=0),
            {"lastSuccessfulSyncTime": S1, "chartCount": 0, "consecutiveFetchFailures": 0, "conditions": [TRUE]},
            id="first-full-pass-empty-repository",
        ),
        pytest.param(
            None,
            PENDING,
            {"chartCount": 1, "consecutiveFetchFailures": 0, "conditions": [PARTIAL]},
            id="first-pass-partial-is-PartialSync",
        ),
        pytest.param(
            FULL_BEFORE,
            OK,
            {**FULL_BEFORE, "lastSuccessfulSyncTime": S1},
            id="full-pass-advances-time-keeps-transition",
        ),
        pytest.param(
            FULL_BEFORE,
            PENDING,
            FULL_BEFORE,
            id="partial-after-a-full-pass-changes-nothing",
        ),
        pytest.param(
            NEVER_FULL_BEFORE,
            PENDING,
            NEVER_FULL_BEFORE,
            id="partial-again-before-any-full-pass-changes-nothing",
        ),
        pytest.param(
            NEVER_FULL_BEFORE,
            OK,
            {**NEVER_FULL_BEFORE, "lastSuccessfulSyncTime": S1, "conditions": [TRUE]},
            id="first-full-pass-clears-PartialSync",
        ),
        pytest.param(
            FULL_BEFORE,
            FAIL,
            {**FULL_BEFORE, "consecutiveFetchFailures": 1, "conditions": [FAILED]},
            id="failed-fetch-counts-keeps-time-and-charts",
        ),
        pytest.param(
            FAILING_BEFORE,
            FAIL,
            {**FAILING_BEFORE, "consecutiveFetchFailures": 4},
            id="failed-again-counts-on-keeps-transition",
        ),
        pytest.param(
            FAILING_BEFORE,
            OK,
            {**FAILING_BEFORE, "lastSuccessfulSyncTime": S1, "consecutiveFetchFailures": 0, "conditions": [TRUE]},
            id="successful-fetch-resets-the-counter",
        ),
        pytest.param(
            FAILING_BEFORE,
            PENDING,
            {**FAILING_BEFORE, "consecutiveFetchFailures": 0, "conditions": [TRUE]},
            id="successful-partial-fetch-resets-counter-not-time",
        ),
        pytest.param(FAILING_BEFORE, NO_FETCH, FAILING_BEFORE, id="no-fetch-carries-everything"),
        pytest.param(None, NO_FETCH, {}, id="no-fetch-on-a-fresh-repository-writes-nothing"),
        pytest.param(
            FULL_BEFORE,
            PassOutcome(fetched=True, charts=1, force_handled=True),
            {**FULL_BEFORE, "lastSuccessfulSyncTime": S1, "lastForceReconcileTime": S1},
            id="force-handled-is-recorded",
        ),
        pytest.param(
            FULL_BEFORE,
            PassOutcome(fetched=True, pending=2, charts=1, force_handled=True),
            {**FULL_BEFORE, "lastForceReconcileTime": S1},
            id="force-handled-on-a-partial-pass-is-recorded-too",
        ),
        pytest.param(
            {**FULL_BEFORE, "nextSyncTime": EARLIER, "conditions": [{"type": "Ready", "status": "True"}]},
            OK,
            {
                **FULL_BEFORE,
                "nextSyncTime": EARLIER,
                "lastSuccessfulSyncTime": S1,
                "conditions": [{"type": "Ready", "status": "True"}, TRUE],
            },
            id="fields-and-conditions-of-others-are-kept",
        ),
    ],
)
def test_desired_repository_status(previous: dict[str, Any] | None, outcome: PassOutcome, expected: Any) -> None:
    assert desired_repository_status(previous, outcome, T1) == expected


def test_many_partial_passes_never_escalate() -> None:
    status = desired_repository_status(None, PENDING, T0)
    first = status
    for minutes in range(1, 200):
        status = desired_repository_status(status, PENDING, T0 + timedelta(minutes=5 * minutes))
    assert status == first
    assert status["conditions"] == [synced("False", "PartialSync", MSG_PARTIAL.format(pending=2), since=S0)]
    assert status["consecutiveFetchFailures"] == 0
    assert "lastSuccessfulSyncTime" not in status


def test_many_partial_passes_after_a_full_one_keep_the_time_frozen_and_synced() -> None:
    status = desired_repository_status(None, OK, T0)
    for minutes in range(1, 200):
        status = desired_repository_status(status, PENDING, T0 + timedelta(minutes=5 * minutes))
    assert status == {
        "lastSuccessfulSyncTime": S0,
        "chartCount": 1,
        "consecutiveFetchFailures": 0,
        "conditions": [synced("True", "Synced", MSG_SYNCED, since=S0)],
    }


def test_a_long_fetch_error_is_cut() -> None:
    status = desired_repository_status(None, PassOutcome(fetched=True, failed=True, error="x" * 5000), T0)
    message = status["conditions"][0]["message"]
    assert len(message.encode()) == 1024
    assert message.startswith(MSG_FETCH_FAILED.format(error="xxx"))
    assert message.endswith("…")
