"""The availability state machine of a ComponentVersion: one registry check in, desired status out.

A missing artifact turns a catalog entry red and never deletes it (DESIGN.md sections 1 and 6).
Red must be earned: a 404 is a *miss*, and ``Available=False`` needs ``misses`` consecutive
misses AND ``grace`` elapsed since the first of them. Every other outcome (401, 403, 5xx, 429,
timeout, transport error, unresolved coordinates, a partial pass) proves nothing about the
artifact, so it gives ``Unknown`` (never False) and leaves the miss count as it was. A manifest
that answers 200 turns the entry green again, from any state.

================  =========================================  ======================================
outcome           condition (status, reason)                 availability
================  =========================================  ======================================
FOUND             True, ArtifactResolved                     misses 0, firstMissAt cleared,
                                                             resolvedDigest = the digest
NOT_FOUND         False, ArtifactMissing once misses >= N    misses + 1 (held at N),
                  and now - firstMissAt >= grace;            firstMissAt = first miss of the run
                  otherwise Unknown, Pending
anything else     Unknown, CheckFailed                       unchanged
================  =========================================  ======================================

Whatever the outcome, ``availability.credentials`` records how the lookup was authenticated (its
:class:`~policies.registry_credentials.CheckedWith` text) when one was sent; an anonymous 401 or 403
also says so in the condition message, since the way out is a Registry or a ReferenceGrant.

``lastTransitionTime`` moves only when the status changes; ``observedGeneration`` follows
``metadata.generation``. The miss count is held at N, so a confirmed-red entry is a steady state.

Writes: :func:`status_changed` compares everything *except* ``lastCheckedAt``. A pass that
changes nothing writes nothing, so ``lastCheckedAt`` is the time of the check that last changed
the status (it travels with every write and is never written alone). How recently the loop ran
is the shell's metric, not an API write per entry and pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from policies.artifacts import DIGEST_LABEL, ArtifactRef, Unresolved, digest_from_label
from policies.model import Obj
from policies.objects import condition, dig, format_time, labels_of, parse_time
from policies.registry_credentials import CheckedWith

AVAILABLE = "Available"


class Outcome(StrEnum):
    """What one manifest lookup of the availability loop answered."""

    FOUND = "Found"
    NOT_FOUND = "NotFound"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    SERVER_ERROR = "ServerError"
    RATE_LIMITED = "RateLimited"
    TIMEOUT = "Timeout"
    TRANSPORT_ERROR = "TransportError"
    UNRESOLVED = "Unresolved"
    PARTIAL_SCAN = "PartialScan"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Reason(StrEnum):
    ARTIFACT_RESOLVED = "ArtifactResolved"
    ARTIFACT_MISSING = "ArtifactMissing"
    CHECK_FAILED = "CheckFailed"
    PENDING = "Pending"


MSG_RESOLVED = "{artifact} resolves to {digest}"
MSG_RESOLVED_OTHER_DIGEST = (
    "{artifact} resolves to {digest}, not to the manifest of label "
    + DIGEST_LABEL
    + "={label}: the tag was pushed again"
)
MSG_PENDING = (
    "{artifact} not found ({misses} of {limit} misses since {since}); "
    "Available turns False after {limit} misses and {grace} since the first"
)
MSG_MISSING = (
    "{artifact} not found since {since} ({misses} consecutive misses); "
    "push the artifact again to turn the entry green, or delete the ComponentVersion"
)
MSG_CHECK_FAILED = "{artifact} could not be checked: {what}{detail}; Available stays Unknown until a check answers"

CHECK_FAILED_WHAT: Mapping[Outcome, str] = {
    Outcome.UNAUTHORIZED: "the registry refused the credentials (401)",
    Outcome.FORBIDDEN: "the registry denied access (403)",
    Outcome.SERVER_ERROR: "the registry answered with a server error",
    Outcome.RATE_LIMITED: "the registry is rate limiting (429)",
    Outcome.TIMEOUT: "the request timed out",
    Outcome.TRANSPORT_ERROR: "the registry could not be reached",
    Outcome.UNRESOLVED: "its coordinates are unresolved",
    Outcome.PARTIAL_SCAN: "the pass did not complete",
}
"""Every outcome that says nothing about the artifact, with how the condition message words it."""

REFUSED = frozenset({Outcome.UNAUTHORIZED, Outcome.FORBIDDEN})
"""Outcomes whose message also says when no credentials were sent: the way out is a Registry (or a grant)."""


@dataclass(frozen=True, slots=True)
class Check:
    """One lookup's result. ``artifact`` names what was looked up (``host/repo:tag``).

    ``detail`` is appended to a CheckFailed message; keep it stable from pass to pass (a status
    code, an error code), since a changed message is a change that gets written. ``credentials``
    says how the lookup was authenticated (``policies.registry_credentials``); None when no lookup
    was sent (unresolved, partial pass), and then the status keeps what it recorded before.
    """

    outcome: Outcome
    artifact: str
    digest: str | None = None
    detail: str = ""
    credentials: CheckedWith | None = None

    @classmethod
    def found(cls, ref: ArtifactRef, digest: str | None, credentials: CheckedWith | None = None) -> Check:
        return cls(Outcome.FOUND, str(ref), digest, credentials=credentials)

    @classmethod
    def missing(cls, ref: ArtifactRef, credentials: CheckedWith | None = None) -> Check:
        return cls(Outcome.NOT_FOUND, str(ref), credentials=credentials)

    @classmethod
    def failed(
        cls, ref: ArtifactRef, outcome: Outcome, detail: str = "", credentials: CheckedWith | None = None
    ) -> Check:
        if outcome not in CHECK_FAILED_WHAT:
            raise ValueError(f"{outcome} is not a failed check")
        return cls(outcome, str(ref), detail=detail, credentials=credentials)

    @classmethod
    def unresolved(cls, why: Unresolved) -> Check:
        return cls(Outcome.UNRESOLVED, f"the artifact of ComponentVersion {why.cv}", detail=why.message)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a run of misses becomes ``Available=False``: ``misses`` in a row and ``grace`` since the first."""

    misses: int = 3
    grace: timedelta = timedelta(minutes=10)

    def __post_init__(self) -> None:
        if self.misses < 1:
            raise ValueError("misses must be at least 1")
        if self.grace < timedelta(0):
            raise ValueError("grace must not be negative")


@dataclass(frozen=True, slots=True)
class Availability:
    """``status.availability``: the bookkeeping the next decision needs."""

    consecutive_misses: int = 0
    first_miss_at: datetime | None = None
    last_checked_at: datetime | None = None
    resolved_digest: str = ""
    credentials: str = ""
    """How the last lookup sent was authenticated (:class:`CheckedWith` text), e.g. "checked anonymously: ..."."""

    @classmethod
    def of(cls, cv: Obj) -> Availability:
        raw = dig(cv, "status", "availability", default={})
        misses = raw.get("consecutiveMisses") if isinstance(raw, Mapping) else None
        return cls(
            consecutive_misses=misses if isinstance(misses, int) and misses > 0 else 0,
            first_miss_at=parse_time(raw.get("firstMissAt")),
            last_checked_at=parse_time(raw.get("lastCheckedAt")),
            resolved_digest=str(raw.get("resolvedDigest") or ""),
            credentials=str(raw.get("credentials") or ""),
        )

    def to_status(self) -> dict[str, Any]:
        """The wire form; absent fields are left out so a cleared field disappears."""
        out: dict[str, Any] = {"consecutiveMisses": self.consecutive_misses}
        if self.first_miss_at is not None:
            out["firstMissAt"] = format_time(self.first_miss_at)
        if self.last_checked_at is not None:
            out["lastCheckedAt"] = format_time(self.last_checked_at)
        if self.resolved_digest:
            out["resolvedDigest"] = self.resolved_digest
        if self.credentials:
            out["credentials"] = self.credentials
        return out


@dataclass(frozen=True, slots=True)
class Verdict:
    """The desired ``Available`` condition and ``status.availability`` after one check."""

    condition: dict[str, Any]
    availability: Availability

    def status_fragment(self) -> dict[str, Any]:
        """``{"conditions": [Available], "availability": {...}}``: what this module owns in ``status``."""
        return {"conditions": [self.condition], "availability": self.availability.to_status()}

    def apply(self, status: Obj | None) -> dict[str, Any]:
        """``status`` with the ``Available`` condition replaced in place (others kept) and availability set."""
        status = dict(status or {})
        conditions = [c for c in status.get("conditions") or () if not _is_available(c)]
        at = next((i for i, c in enumerate(status.get("conditions") or ()) if _is_available(c)), len(conditions))
        conditions.insert(at, self.condition)
        status["conditions"] = conditions
        status["availability"] = self.availability.to_status()
        return status


def _is_available(cond: Any) -> bool:
    return isinstance(cond, Mapping) and cond.get("type") == AVAILABLE


def decide(cv: Obj, check: Check, now: datetime, thresholds: Thresholds = Thresholds()) -> Verdict:
    """The status ``cv`` should have after ``check`` at ``now`` (pure; see the module table)."""
    old = Availability.of(cv)
    credentials = check.credentials.text if check.credentials else old.credentials
    if check.outcome is Outcome.FOUND:
        availability = Availability(0, None, now, check.digest or old.resolved_digest, credentials)
        status, reason, message = ConditionStatus.TRUE, Reason.ARTIFACT_RESOLVED, _resolved_message(cv, check)
    elif check.outcome is Outcome.NOT_FOUND:
        first = old.first_miss_at if old.consecutive_misses and old.first_miss_at else now
        misses = min(old.consecutive_misses + 1, thresholds.misses)
        availability = Availability(misses, first, now, old.resolved_digest, credentials)
        fields = {"artifact": check.artifact, "misses": misses, "limit": thresholds.misses, "since": format_time(first)}
        if misses >= thresholds.misses and now - first >= thresholds.grace:
            status, reason, message = ConditionStatus.FALSE, Reason.ARTIFACT_MISSING, MSG_MISSING.format(**fields)
        else:
            status, reason = ConditionStatus.UNKNOWN, Reason.PENDING
            message = MSG_PENDING.format(**fields, grace=go_duration(thresholds.grace))
    else:
        availability = replace(old, last_checked_at=now, credentials=credentials)
        status, reason = ConditionStatus.UNKNOWN, Reason.CHECK_FAILED
        details = [check.detail] if check.detail else []
        if check.outcome in REFUSED and check.credentials is not None and check.credentials.anonymous:
            details.append(check.credentials.text)
        detail = f" ({'; '.join(details)})" if details else ""
        message = MSG_CHECK_FAILED.format(artifact=check.artifact, what=CHECK_FAILED_WHAT[check.outcome], detail=detail)
    return Verdict(_condition(cv, status, reason, message, now), availability)


def _resolved_message(cv: Obj, check: Check) -> str:
    digest = check.digest or "an unreported digest"
    label = labels_of(cv).get(DIGEST_LABEL, "")
    full, prefix = digest_from_label(label)
    expected = full.removeprefix("sha256:") if full else prefix
    if check.digest and expected and not check.digest.removeprefix("sha256:").startswith(expected):
        return MSG_RESOLVED_OTHER_DIGEST.format(artifact=check.artifact, digest=digest, label=label)
    return MSG_RESOLVED.format(artifact=check.artifact, digest=digest)


def _condition(cv: Obj, status: ConditionStatus, reason: Reason, message: str, now: datetime) -> dict[str, Any]:
    old = condition(cv, AVAILABLE) or {}
    since = old.get("lastTransitionTime") if old.get("status") == status and old.get("lastTransitionTime") else None
    cond: dict[str, Any] = {
        "type": AVAILABLE,
        "status": str(status),
        "reason": str(reason),
        "message": message,
        "lastTransitionTime": since or format_time(now),
    }
    generation = dig(cv, "metadata", "generation")
    if isinstance(generation, int):
        cond["observedGeneration"] = generation
    return cond


def status_changed(old: Obj | None, new: Obj | None) -> bool:
    """Whether writing ``new`` (a status or status fragment) would change ``old`` beyond ``lastCheckedAt``.

    Only what this module owns is compared: the ``Available`` condition and ``availability``.
    """
    return _comparable(old) != _comparable(new)


def _comparable(status: Obj | None) -> tuple[Any, Any]:
    status = status or {}
    cond = next((dict(c) for c in status.get("conditions") or () if _is_available(c)), None)
    availability = dict(status.get("availability") or {})
    availability.pop("lastCheckedAt", None)
    if not availability.get("consecutiveMisses"):
        availability.pop("consecutiveMisses", None)
    return cond, availability


_UNITS: tuple[tuple[str, int], ...] = (("h", 3600), ("m", 60), ("s", 1))


def go_duration(value: timedelta) -> str:
    """``10m0s``-style text as Go prints a ``time.Duration`` (``0s`` for zero, ``1.5s`` for fractions)."""
    micros = round(value.total_seconds() * 1_000_000)
    seconds, fraction = divmod(micros, 1_000_000)
    out, started = "", False
    for unit, size in _UNITS[:2]:
        amount, seconds = divmod(seconds, size)
        if amount or started:
            out += f"{amount}{unit}"
            started = True
    tail = f".{fraction:06d}".rstrip("0") if fraction else ""
    return f"{out}{seconds}{tail}s"
