"""The reclamation plan for one registry: what to remove so the registry's own GC frees it.

Catalog-warden never deletes blobs; it removes manifests or tags that no ComponentVersion keeps
and leaves storage to the registry's GC (seed 000, "storage reclamation belongs to the
registry"). The plan is pure: the shell lists the registry, calls :func:`plan`, and executes
(or, in dry-run, logs) the actions in order.

Guarantees, each a test in ``tests/policies/test_reclaim.py``:

- only from a complete :class:`~policies.referenced_set.ReferencedSet`; an
  :class:`~policies.referenced_set.IncompleteSet` is refused, as is a set that names nothing in
  this registry (a host spelled differently would otherwise look like "nothing is kept");
- only in managed repositories (a ``component-descriptors`` segment); others are never touched;
- ``distribution-delete`` deletes a manifest by digest, which removes every tag on it, so a digest
  is deleted only when no kept tag resolves to it, it is not a kept digest, and every tag on it
  is old enough; a repository whose listing lacks a digest for some tag is skipped whole;
- ``zot-untag`` removes one tag; a tag whose digest is kept (and no other tag holds it) is
  never untagged, since zot's ``deleteUntagged`` would then reclaim the kept manifest;
- nothing younger than the safety age, and nothing of unknown age;
- at most ``cap`` actions, oldest first (then repository and reference), so a pass is bounded
  and two passes over the same state choose alike;
- the circuit breaker (:func:`breaker`, applied by the shell after :func:`plan`): a plan is held,
  removing nothing, while its registry shows the signs of a misconfiguration rather than of
  garbage, until an operator confirms exactly that plan (see :func:`breaker`).

Ages: the registry APIs carry no push time, so :attr:`TagInfo.created` is whatever the shell
knows: the manifest's ``org.opencontainers.image.created`` or the time the sidecar first listed
the tag (which is never earlier than the push, so the age is never overstated).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from policies.artifacts import is_managed_repository, registry_key
from policies.availability import go_duration
from policies.model import Obj
from policies.objects import annotations_of
from policies.referenced_set import IncompleteSet, Keep, ReferencedSet

RECLAIM_ANNOTATION = "catalog-warden.io/reclaim"
CONFIRM_ANNOTATION = "catalog-warden.io/reclaim-confirm"
"""On the Registry: the fingerprint of a plan the circuit breaker held, to let that plan (only) go through."""


class ReclaimMode(StrEnum):
    """How a registry removes what is not kept (Registry annotation ``catalog-warden.io/reclaim``)."""

    DISTRIBUTION_DELETE = "distribution-delete"
    ZOT_UNTAG = "zot-untag"


def reclaim_mode_of(registry: Obj) -> ReclaimMode | None:
    """The Registry's reclamation mode; absent or an unknown value means off (fail-safe)."""
    value = annotations_of(registry).get(RECLAIM_ANNOTATION, "")
    return ReclaimMode(value) if value in ReclaimMode._value2member_map_ else None


def confirmation_of(registry: Obj) -> str:
    """The fingerprint an operator confirmed on the Registry ("" when none)."""
    return annotations_of(registry).get(CONFIRM_ANNOTATION, "").strip()


class ActionKind(StrEnum):
    DELETE_DIGEST = "DeleteDigest"
    UNTAG = "Untag"


@dataclass(frozen=True, slots=True)
class TagInfo:
    """One tag of a listed repository: the digest it resolves to (None if the lookup failed) and its age."""

    tag: str
    digest: str | None
    created: datetime | None = None


@dataclass(frozen=True, slots=True)
class Action:
    """Remove ``reference`` (a digest or a tag) from ``repository``; ``tags`` are the tags that go with it."""

    kind: ActionKind
    repository: str
    reference: str
    tags: tuple[str, ...]
    created: datetime | None
    """The youngest creation time among ``tags``; None when any is unknown (then never planned)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Something reclamation left alone on purpose, and why (for logs and the dry-run report)."""

    repository: str
    reference: str
    reason: str


class TripReason(StrEnum):
    """Why the circuit breaker held a plan (a closed set: also the refusal metric's label)."""

    UNRESOLVED = "unresolved"
    """A repository the referenced set keeps in this registry shows nothing it keeps."""
    SHARE = "share"
    """The plan would remove more than ``reclaim.maxRemovalShare`` of a repository's tags."""


@dataclass(frozen=True, slots=True)
class Trip:
    """One sign of a misconfiguration: its reason, the repository it is about, and what was seen."""

    reason: TripReason
    repository: str
    message: str


@dataclass(frozen=True, slots=True)
class Approval:
    """A plan an operator confirmed and this process started: its trips and removals, as keys.

    A later plan whose trips and removals are all within it is the rest of that plan (the cap
    leaves part for later passes), not a new one; anything beyond it is refused again.
    """

    trips: frozenset[tuple[str, str]]
    removals: frozenset[tuple[str, str, str]]

    def covers(self, trips: Iterable[Trip], removals: Iterable[Action]) -> bool:
        return {_trip_key(t) for t in trips} <= self.trips and {_action_key(a) for a in removals} <= self.removals


@dataclass(frozen=True, slots=True)
class ReclaimPlan:
    """The ordered actions, what was skipped, how many were left for a later pass, or a refusal.

    ``candidates`` is every removal the plan found (``actions`` is its first ``cap``); ``trips``,
    ``fingerprint`` and ``confirmed`` are the circuit breaker's verdict (:func:`breaker`).
    """

    registry: str
    mode: ReclaimMode
    actions: tuple[Action, ...] = ()
    skipped: tuple[Skip, ...] = ()
    deferred: int = 0
    refused: str = ""
    candidates: tuple[Action, ...] = ()
    trips: tuple[Trip, ...] = ()
    fingerprint: str = ""
    confirmed: bool = False

    def approval(self) -> Approval:
        """What this plan's confirmation covers (the shell remembers it for the passes that follow)."""
        return Approval(frozenset(_trip_key(t) for t in self.trips), frozenset(_action_key(a) for a in self.candidates))


REFUSED_INCOMPLETE = "the referenced set is incomplete ({summary}); nothing is reclaimed"
REFUSED_UNKNOWN_REGISTRY = (
    "the referenced set names nothing in registry {registry}; nothing is reclaimed "
    "(check that Components' spec.registry spells the host as the Registry does)"
)
SKIP_UNMANAGED = "outside component-descriptors/ repositories"
SKIP_UNKNOWN_DIGEST = "a tag's digest is unknown, so digest sharing cannot be ruled out"
SKIP_SHARED = "a kept tag {tag} shares this digest"
SKIP_KEPT_DIGEST = "the digest is kept by a ComponentVersion"
SKIP_YOUNG = "younger than the safety age {age}"
SKIP_AGE_UNKNOWN = "its age is unknown"


def plan(
    referenced: ReferencedSet | IncompleteSet,
    registry: str,
    listing: Mapping[str, Sequence[TagInfo]],
    mode: ReclaimMode,
    safety_age: timedelta,
    cap: int,
    now: datetime,
    plain_http: bool = False,
) -> ReclaimPlan:
    """The actions that reclaim what ``referenced`` does not keep in ``registry`` (see the module doc).

    ``listing`` maps each repository the shell listed to all of its tags. ``registry`` is matched
    however it is spelled (:func:`~policies.artifacts.registry_key`; ``plain_http`` says which
    default port it may leave out).
    """
    if not isinstance(referenced, ReferencedSet):
        return ReclaimPlan(registry, mode, refused=REFUSED_INCOMPLETE.format(summary=referenced.summary()))
    key = registry_key(registry, plain_http)
    if not referenced.registries.get(key):
        return ReclaimPlan(registry, mode, refused=REFUSED_UNKNOWN_REGISTRY.format(registry=registry))
    candidates: list[Action] = []
    skipped: list[Skip] = []
    for repository, tags in sorted(listing.items()):
        if not is_managed_repository(repository):
            skipped.append(Skip(repository, "", SKIP_UNMANAGED))
            continue
        keep = referenced.keep(key, repository)
        planner = _PLANNERS[mode]
        found, skips = planner(repository, tags, frozenset(keep.tags), frozenset(keep.digests))
        skipped.extend(skips)
        for action in found:
            why = _too_young(action, safety_age, now)
            if why:
                skipped.append(Skip(repository, action.reference, why))
            else:
                candidates.append(action)
    candidates.sort(key=lambda a: (a.created or now, a.repository, a.reference))
    cap = max(cap, 0)
    return ReclaimPlan(
        registry,
        mode,
        tuple(candidates[:cap]),
        tuple(skipped),
        max(len(candidates) - cap, 0),
        candidates=tuple(candidates),
    )


def _too_young(action: Action, safety_age: timedelta, now: datetime) -> str:
    if action.created is None:
        return SKIP_AGE_UNKNOWN
    if now - action.created < safety_age:
        return SKIP_YOUNG.format(age=go_duration(safety_age))
    return ""


PlanFn = tuple[list[Action], list[Skip]]


def _by_digest(
    repository: str, tags: Sequence[TagInfo], kept_tags: frozenset[str], kept_digests: frozenset[str]
) -> PlanFn:
    """distribution-delete: one DELETE per unkept digest; never a digest a kept tag or the set holds."""
    if any(t.digest is None for t in tags):
        return [], [Skip(repository, "", SKIP_UNKNOWN_DIGEST)]
    by_digest: dict[str, list[TagInfo]] = {}
    for info in tags:
        by_digest.setdefault(str(info.digest), []).append(info)
    actions: list[Action] = []
    skips: list[Skip] = []
    for digest, infos in sorted(by_digest.items()):
        kept = sorted(t.tag for t in infos if t.tag in kept_tags)
        if len(kept) == len(infos):
            continue
        if kept:
            skips.append(Skip(repository, digest, SKIP_SHARED.format(tag=kept[0])))
        elif digest in kept_digests:
            skips.append(Skip(repository, digest, SKIP_KEPT_DIGEST))
        else:
            names = tuple(sorted(t.tag for t in infos))
            actions.append(Action(ActionKind.DELETE_DIGEST, repository, digest, names, _youngest(infos)))
    return actions, skips


def _by_tag(
    repository: str, tags: Sequence[TagInfo], kept_tags: frozenset[str], kept_digests: frozenset[str]
) -> PlanFn:
    """zot-untag: one untag per unkept tag; never the last tag on a kept digest."""
    holders: dict[str | None, set[str]] = {}
    for info in tags:
        holders.setdefault(info.digest, set()).add(info.tag)
    actions: list[Action] = []
    skips: list[Skip] = []
    for info in sorted(tags, key=lambda t: t.tag):
        if info.tag in kept_tags:
            continue
        if info.digest is None:
            skips.append(Skip(repository, info.tag, SKIP_UNKNOWN_DIGEST))
        elif info.digest in kept_digests and not holders[info.digest] & kept_tags:
            skips.append(Skip(repository, info.tag, SKIP_KEPT_DIGEST))
        else:
            actions.append(Action(ActionKind.UNTAG, repository, info.tag, (info.tag,), _youngest([info])))
    return actions, skips


_PLANNERS = {ReclaimMode.DISTRIBUTION_DELETE: _by_digest, ReclaimMode.ZOT_UNTAG: _by_tag}


def _youngest(infos: Iterable[TagInfo]) -> datetime | None:
    """The latest creation time among ``infos``, or None when any of them is unknown."""
    times = [t.created for t in infos]
    known = [t for t in times if t is not None]
    return max(known) if known and len(known) == len(times) else None


# ---- the circuit breaker ----------------------------------------------------------------------

REFUSED_BREAKER = (
    "circuit breaker: nothing is reclaimed in {registry} until an operator confirms this plan of "
    "{count} removal(s) with the Registry annotation {annotation}={fingerprint}: {trips}"
)
TRIP_NOT_LISTED = (
    "{repository} is kept by the referenced set but is not in the registry's catalog "
    "(does a Component map its versions to the wrong repository?)"
)
TRIP_NOTHING_FOUND = (
    "{repository} is kept by the referenced set but holds none of its {count} kept tag(s) "
    "(does a Component map its versions to the wrong tags?)"
)
TRIP_SHARE = "{repository}: {removed} of {listed} tag(s) would go, more than reclaim.maxRemovalShare {share:g}"
TRIPS_SHOWN = 3
FINGERPRINT_LENGTH = 16
"""Hex digits of sha256 kept: short enough to type, long enough that two plans never collide by chance."""


def breaker(
    proposed: ReclaimPlan,
    referenced: ReferencedSet | IncompleteSet,
    listing: Mapping[str, Sequence[TagInfo]],
    max_share: float,
    confirmed: str = "",
    approval: Approval | None = None,
    plain_http: bool = False,
) -> ReclaimPlan:
    """``proposed`` as it may run: held (no actions, refused with the fingerprint) or let through.

    The breaker looks only at plans that would remove something, and trips on either sign that
    the referenced set and the registry disagree about where the artifacts are:

    - :attr:`TripReason.UNRESOLVED`: a repository the set keeps in this registry is not in the
      catalog, or holds none of the tags and digests the set keeps there. That is what a
      Component mapping its versions to a wrong repository (or wrong tags) looks like, and then
      the real repository is unkept and would be reclaimed whole. A single red entry whose
      artifact is gone, in a repository that still holds other kept artifacts, does not trip it
      (that is the availability loop's business, and common); a kept repository whose every
      kept artifact is gone does, since it cannot be told apart from a misconfiguration (its
      entries turn red either way): the operator confirms, or removes those entries;
    - :attr:`TripReason.SHARE`: the whole plan (not only this pass's capped part) would remove
      more than ``max_share`` of some repository's listed tags. The per-repository share bounds
      the registry's share too, so it is checked per repository only.

    A tripped plan goes through only when ``confirmed`` (the Registry's
    :data:`CONFIRM_ANNOTATION`) is its fingerprint, or ``approval`` (a confirmed plan this
    process already started) covers it. The fingerprint digests the registry, the mode, the
    trips (reason and repository) and every removal, never ages or times: the same plan prints
    the same fingerprint on every pass, and any other plan prints another.
    """
    if proposed.refused or not proposed.candidates or not isinstance(referenced, ReferencedSet):
        return proposed
    key = registry_key(proposed.registry, plain_http)
    trips = (
        *_unresolved(referenced.registries.get(key, {}), listing),
        *_over_share(proposed.candidates, listing, max_share),
    )
    if not trips:
        return proposed
    fingerprint = plan_fingerprint(key, proposed.mode, trips, proposed.candidates)
    held = replace(proposed, trips=trips, fingerprint=fingerprint)
    if confirmed == fingerprint or (approval is not None and approval.covers(trips, proposed.candidates)):
        return replace(held, confirmed=True)
    return replace(
        held,
        actions=(),
        deferred=len(proposed.candidates),
        refused=REFUSED_BREAKER.format(
            registry=proposed.registry,
            count=len(proposed.candidates),
            annotation=CONFIRM_ANNOTATION,
            fingerprint=fingerprint,
            trips=_summary(trips),
        ),
    )


def plan_fingerprint(registry: str, mode: ReclaimMode, trips: Iterable[Trip], removals: Iterable[Action]) -> str:
    """The short digest naming one held plan (see :func:`breaker`)."""
    doc = {
        "registry": registry,
        "mode": str(mode),
        "trips": sorted(_trip_key(t) for t in trips),
        "removals": sorted(_action_key(a) for a in removals),
    }
    encoded = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:FINGERPRINT_LENGTH]


def _unresolved(kept: Mapping[str, Keep], listing: Mapping[str, Sequence[TagInfo]]) -> list[Trip]:
    trips: list[Trip] = []
    for repository, keep in sorted(kept.items()):
        listed = listing.get(repository)
        if listed is None:
            trips.append(Trip(TripReason.UNRESOLVED, repository, TRIP_NOT_LISTED.format(repository=repository)))
            continue
        tags = {t.tag for t in listed}
        digests = {t.digest for t in listed if t.digest}
        if not (tags & set(keep.tags) or digests & set(keep.digests)):
            message = TRIP_NOTHING_FOUND.format(repository=repository, count=len(keep.tags))
            trips.append(Trip(TripReason.UNRESOLVED, repository, message))
    return trips


def _over_share(candidates: Sequence[Action], listing: Mapping[str, Sequence[TagInfo]], max_share: float) -> list[Trip]:
    removed: dict[str, set[str]] = {}
    for action in candidates:
        removed.setdefault(action.repository, set()).update(action.tags)
    trips: list[Trip] = []
    for repository, tags in sorted(removed.items()):
        listed = len({t.tag for t in listing.get(repository, ())})
        if listed and len(tags) / listed > max_share:
            message = TRIP_SHARE.format(repository=repository, removed=len(tags), listed=listed, share=max_share)
            trips.append(Trip(TripReason.SHARE, repository, message))
    return trips


def _summary(trips: Sequence[Trip]) -> str:
    shown = "; ".join(t.message for t in trips[:TRIPS_SHOWN])
    rest = len(trips) - TRIPS_SHOWN
    return f"{shown}; and {rest} more" if rest > 0 else shown


def _trip_key(trip: Trip) -> tuple[str, str]:
    return (str(trip.reason), trip.repository)


def _action_key(action: Action) -> tuple[str, str, str]:
    return (str(action.kind), action.repository, action.reference)
