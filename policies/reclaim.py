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
  and two passes over the same state choose alike.

Ages: the registry APIs carry no push time, so :attr:`TagInfo.created` is whatever the shell
knows: the manifest's ``org.opencontainers.image.created`` or the time the sidecar first listed
the tag (which is never earlier than the push, so the age is never overstated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from policies.artifacts import is_managed_repository, registry_key
from policies.availability import go_duration
from policies.model import Obj
from policies.objects import annotations_of
from policies.referenced_set import IncompleteSet, ReferencedSet

RECLAIM_ANNOTATION = "catalog-warden.io/reclaim"


class ReclaimMode(StrEnum):
    """How a registry removes what is not kept (Registry annotation ``catalog-warden.io/reclaim``)."""

    DISTRIBUTION_DELETE = "distribution-delete"
    ZOT_UNTAG = "zot-untag"


def reclaim_mode_of(registry: Obj) -> ReclaimMode | None:
    """The Registry's reclamation mode; absent or an unknown value means off (fail-safe)."""
    value = annotations_of(registry).get(RECLAIM_ANNOTATION, "")
    return ReclaimMode(value) if value in ReclaimMode._value2member_map_ else None


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


@dataclass(frozen=True, slots=True)
class ReclaimPlan:
    """The ordered actions, what was skipped, how many were left for a later pass, or a refusal."""

    registry: str
    mode: ReclaimMode
    actions: tuple[Action, ...] = ()
    skipped: tuple[Skip, ...] = ()
    deferred: int = 0
    refused: str = ""


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
    return ReclaimPlan(registry, mode, tuple(candidates[:cap]), tuple(skipped), max(len(candidates) - cap, 0))


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
