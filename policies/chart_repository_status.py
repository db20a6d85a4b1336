"""A HelmClusterAddonRepository's ``status`` after one chart-index pass (seed 004, reference B6).

The chart indexer records verdicts in the HelmClusterAddonChart; the repository's own status
says how the reading went. This module is the pure half: from the previous status, what the pass
did (:class:`PassOutcome`) and ``now`` it gives the status as it should be; the shell writes it
only when it differs, so a pass that changes nothing writes nothing.

Rules a caller may rely on:

- ``lastSuccessfulSyncTime`` advances only on a pass with no pending tag: it means "fully brought
  up to date", and a frozen Last Sync column is the signal of a tag that keeps failing.
- ``consecutiveFetchFailures`` counts failed fetches (+1), resets to 0 on a successful one, and is
  carried unchanged when no fetch was attempted, so a pass that failed before contacting the
  registry can neither reset nor raise it.
- ``chartCount`` is set from a successful fetch only (unset until the first one).
- ``lastForceReconcileTime`` is ``now`` when a force request was acted on (not that it succeeded).
- Condition ``Synced``: True (reason ``Synced``) after a successful fetch; False with reason
  ``PartialSync`` only while no full pass has ever happened and tags are pending (afterwards the
  frozen time is the signal, so one junk tag does not flap the condition); False with reason
  ``SyncFailed`` after a failed fetch. Nothing escalates: pending tags are retried forever and no
  ``Stalled`` condition is ever written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from policies.chart_index import cut_message
from policies.objects import format_time

SYNCED = "Synced"
LAST_SUCCESSFUL_SYNC = "lastSuccessfulSyncTime"
LAST_FORCE_RECONCILE = "lastForceReconcileTime"
FETCH_FAILURES = "consecutiveFetchFailures"
CHART_COUNT = "chartCount"

MSG_SYNCED = "the repository was read and its catalog recorded"
MSG_PARTIAL = "{pending} tag(s) not resolved yet; retried every pass, the first full pass sets lastSuccessfulSyncTime"
MSG_FETCH_FAILED = "reading the repository failed: {error}"


class SyncedReason(StrEnum):
    SYNCED = "Synced"
    PARTIAL = "PartialSync"
    FAILED = "SyncFailed"


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What one index pass did for one repository."""

    fetched: bool
    """The registry was contacted (the tag listing was sent)."""
    failed: bool = False
    """The fetch failed (tag listing error, or 401/403 on a manifest): nothing was recorded."""
    pending: int = 0
    """Listed versions still without a verdict after the pass."""
    charts: int = 0
    """Charts the repository offers (an ``oci://`` repository: 1 once a version is listed)."""
    force_handled: bool = False
    """A force-reconcile request was acted on in this pass."""
    error: str = ""
    """The fetch error, for the ``SyncFailed`` message."""


def _synced(outcome: PassOutcome, ever_full: bool) -> tuple[bool, SyncedReason, str] | None:
    """(status, reason, message) of the Synced condition, or None to keep the previous one."""
    if not outcome.fetched:
        return None
    if outcome.failed:
        return False, SyncedReason.FAILED, cut_message(MSG_FETCH_FAILED.format(error=outcome.error), 1024)
    if outcome.pending and not ever_full:
        return False, SyncedReason.PARTIAL, MSG_PARTIAL.format(pending=outcome.pending)
    return True, SyncedReason.SYNCED, MSG_SYNCED


def _with_condition(
    conditions: Any, status: bool, reason: SyncedReason, message: str, now: datetime
) -> list[dict[str, Any]]:
    """The conditions with ``Synced`` replaced; its ``lastTransitionTime`` moves only when its status does."""
    items = [dict(c) for c in conditions if isinstance(c, Mapping)] if isinstance(conditions, list) else []
    old = next((c for c in items if c.get("type") == SYNCED), {})
    text = "True" if status else "False"
    since = old.get("lastTransitionTime") if old.get("status") == text else None
    new = {
        "type": SYNCED,
        "status": text,
        "reason": str(reason),
        "message": message,
        "lastTransitionTime": since or format_time(now),
    }
    if not old:
        return [*items, new]
    return [new if c.get("type") == SYNCED else c for c in items]


def _failures(previous: Mapping[str, Any], outcome: PassOutcome) -> int:
    count = previous.get(FETCH_FAILURES)
    carried = count if isinstance(count, int) and count >= 0 else 0
    if not outcome.fetched:
        return carried
    return carried + 1 if outcome.failed else 0


def desired_repository_status(
    previous: Mapping[str, Any] | None, outcome: PassOutcome, now: datetime
) -> dict[str, Any]:
    """The repository's ``status`` after a pass; fields this module does not own are kept as they were."""
    old = dict(previous) if isinstance(previous, Mapping) else {}
    status = dict(old)
    full = outcome.fetched and not outcome.failed and outcome.pending == 0
    if full:
        status[LAST_SUCCESSFUL_SYNC] = format_time(now)
    if outcome.fetched and not outcome.failed:
        status[CHART_COUNT] = outcome.charts
    if outcome.fetched or FETCH_FAILURES in old:
        status[FETCH_FAILURES] = _failures(old, outcome)
    if outcome.force_handled:
        status[LAST_FORCE_RECONCILE] = format_time(now)
    synced = _synced(outcome, bool(status.get(LAST_SUCCESSFUL_SYNC)))
    if synced is not None:
        status["conditions"] = _with_condition(old.get("conditions"), *synced, now)
    return status
