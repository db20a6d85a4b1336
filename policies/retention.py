"""The retention janitor's plan: which red ComponentVersions to delete this sweep, and why others stay.

Deletion follows intent (seed 000): a missing artifact only turns an entry red, and the janitor is
the one automatic way an entry goes. It deletes a ComponentVersion only when ALL of these hold,
checked in this order (the first that fails is the reason it is kept):

==================  ==========================================================================
kept because        the entry ...
==================  ==========================================================================
UNREADABLE          has no readable ``metadata`` with name, uid and resourceVersion (a delete
                    could not carry its preconditions)
TERMINATING         is already being deleted
NOT_RED             is not ``Available=False`` (True, Unknown, or never checked)
RED_TOO_RECENT      has been False for less than ``minRedAge`` (from ``lastTransitionTime``;
                    a missing or unreadable time, or one without a zone, counts as too recent)
RETAINED            carries the label ``catalog-warden.io/retain: "true"`` (labels that are not
                    a mapping cannot say otherwise, so they retain too)
EXCLUDED_NAMESPACE  lives in one of ``excludedNamespaces``
PROTECTED           carries a SolAr protection finalizer (``solar.opendefense.cloud/componentversion-ref``,
                    or any other of ``catalog_deletion.PROTECTION_FINALIZERS``: in use)
REFERENCED          is referenced by a live (non-terminating) Release
NO_COMPONENT        names no Component, so keep-last cannot be applied to it
KEEP_LAST           is among the newest ``keepLast`` ComponentVersions of its Component
OVER_CAP            would exceed ``maxDeletesPerSweep`` (deleted by a later sweep)
==================  ==========================================================================

"Newest" ranks the live ComponentVersions of one Component (green and red alike) by the semver
of ``spec.tag`` (a leading ``v`` allowed), then ``creationTimestamp``, then name; tags that are not
semver rank below every semver tag and among themselves by ``creationTimestamp`` (a non-semver
tag is a snapshot or a hand-made entry, not a release line).

Each deletion carries the uid and resourceVersion the entry had when it was evaluated: the shell
deletes with those as preconditions, so an entry that changed in between (a Release bound, the
finalizer was added, the artifact returned) is skipped, never forced. Deletions are ordered
longest red first, then ``namespace/name``; the cap keeps that prefix.

Malformed objects (a string where a mapping belongs) never stop the sweep: what cannot be read
keeps its entry, and a Release whose metadata cannot be read counts as live.

Pure and fast: one pass over the entries, ranking only Components that have a candidate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from policies.availability import AVAILABLE, go_duration
from policies.catalog_deletion import PROTECTION_FINALIZERS
from policies.catalog_refs import COMPONENT_VERSIONS_BY_COMPONENT, RELEASES_BY_COMPONENT_VERSION, component_key
from policies.kinds import COMPONENT_VERSION, RELEASE
from policies.model import Obj
from policies.objects import finalizers_of, format_time, parse_time
from policies.sidecar_config import RetentionConfig
from policies.view import View

RETAIN_LABEL = "catalog-warden.io/retain"
"""``"true"`` exempts a ComponentVersion from the janitor for good (vital components)."""


class KeepReason(StrEnum):
    UNREADABLE = "Unreadable"
    TERMINATING = "Terminating"
    NOT_RED = "NotRed"
    RED_TOO_RECENT = "RedTooRecent"
    RETAINED = "Retained"
    EXCLUDED_NAMESPACE = "ExcludedNamespace"
    PROTECTED = "Protected"
    REFERENCED = "Referenced"
    NO_COMPONENT = "NoComponent"
    KEEP_LAST = "KeepLast"
    OVER_CAP = "OverCap"


MSG_DELETE = (
    "{verb} by the retention janitor: Available=False since {since} ({age}, at least {min_age}), "
    "no live Release references it, not among the newest {keep_last} of Component {component}; "
    "label it " + RETAIN_LABEL + '="true" to keep such an entry'
)
"""Why an entry goes: the Event message. ``verb`` is ``deleted`` or, in dry-run, ``would be deleted``."""
VERB_DELETED = "deleted"
VERB_DRY_RUN = "would be deleted"
REFUSED_UNSYNCED = "the cache has not synced: an unlisted Release could reference any entry; nothing is deleted"


@dataclass(frozen=True, slots=True)
class Deletion:
    """One entry to delete, as evaluated: the shell's delete carries ``uid`` and ``resource_version``."""

    key: str
    """``namespace/name``."""
    namespace: str
    name: str
    uid: str
    resource_version: str
    red_since: datetime
    component: str
    """``namespace/name`` of its Component."""
    obj: Obj
    """The object as evaluated (what the precondition and the Event refer to)."""

    def message(self, now: datetime, config: RetentionConfig, *, dry_run: bool = False) -> str:
        """Why it goes (the Event's message), from what the plan saw."""
        return MSG_DELETE.format(
            verb=VERB_DRY_RUN if dry_run else VERB_DELETED,
            since=format_time(self.red_since),
            age=go_duration(timedelta(seconds=int((now - self.red_since).total_seconds()))),
            min_age=go_duration(config.minRedAge),
            keep_last=config.keepLast,
            component=self.component,
        )


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    deletions: tuple[Deletion, ...]
    """In execution order: longest red first, then ``namespace/name``; at most ``maxDeletesPerSweep``."""
    kept: Mapping[str, KeepReason] = field(default_factory=dict)
    """Every other entry (``namespace/name``) with the first condition that kept it."""
    refused: str = ""
    """Why nothing at all was planned (the view is incomplete); empty otherwise."""

    def kept_counts(self) -> dict[KeepReason, int]:
        counts: dict[KeepReason, int] = {}
        for reason in self.kept.values():
            counts[reason] = counts.get(reason, 0) + 1
        return counts


_EMPTY: Mapping[str, object] = {}


def _mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else empty: one malformed field must not stop the sweep."""
    return value if isinstance(value, Mapping) else _EMPTY


_PRECONDITION_FIELDS = ("name", "uid", "resourceVersion")


def _aware(value: datetime | None) -> datetime | None:
    """A time without a zone cannot be compared with ``now``: unreadable, so None."""
    return value if value is not None and value.tzinfo is not None else None


# ---- ranking ----------------------------------------------------------------------------------

_SEMVER = re.compile(
    r"v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)

_RELEASE = (1,)
"""A version without pre-release ranks above all of its pre-releases (semver 11.3)."""

SemverKey = tuple[int, int, int, tuple[object, ...]]


def semver_key(tag: str) -> SemverKey | None:
    """A sort key with semver 2.0 precedence (build metadata ignored), or None when ``tag`` is not semver."""
    match = _SEMVER.fullmatch(tag)
    if match is None:
        return None
    major, minor, patch, pre = match.groups()
    if pre is None:
        return int(major), int(minor), int(patch), _RELEASE
    # numeric identifiers rank below alphanumeric ones; a shorter list ranks below a longer equal prefix
    idents = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return int(major), int(minor), int(patch), (0, idents)


def newness(cv: Obj) -> tuple[object, ...]:
    """Sort key, larger is newer: semver tags above the rest, then creationTimestamp, then name."""
    meta = _mapping(cv.get("metadata"))
    tag = _mapping(cv.get("spec")).get("tag")
    version = semver_key(tag) if isinstance(tag, str) else None
    created = str(meta.get("creationTimestamp") or "")
    name = str(meta.get("name") or "")
    return (1, version, created, name) if version is not None else (0, (), created, name)


# ---- the plan ---------------------------------------------------------------------------------


def _red_since(cv: Obj) -> tuple[bool, datetime | None]:
    """(red, lastTransitionTime of the False condition)."""
    status = cv.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for cond in conditions or ():
        if isinstance(cond, dict) and cond.get("type") == AVAILABLE:
            if cond.get("status") != "False":
                return False, None
            since = cond.get("lastTransitionTime")
            return True, _aware(parse_time(since)) if isinstance(since, str) else None
    return False, None


@dataclass(frozen=True, slots=True)
class _Candidate:
    cv: Obj
    key: str
    since: datetime
    component: str


def plan(view: View, now: datetime, config: RetentionConfig) -> RetentionPlan:
    """The deletions of one sweep over every ComponentVersion in ``view`` at ``now`` (pure).

    An unsynced view plans nothing: a Release not yet listed would make a used entry look unused.
    """
    if not view.synced:
        return RetentionPlan((), {}, REFUSED_UNSYNCED)
    kept: dict[str, KeepReason] = {}
    candidates: list[_Candidate] = []
    excluded = frozenset(config.excludedNamespaces)
    oldest = now - config.minRedAge
    for cv in view.list(COMPONENT_VERSION):
        meta = _mapping(cv.get("metadata"))
        namespace = str(meta.get("namespace") or "")
        key = f"{namespace}/{meta.get('name', '')}"
        if not all(isinstance(meta.get(f), str) and meta.get(f) for f in _PRECONDITION_FIELDS):
            kept[key] = KeepReason.UNREADABLE
            continue
        if meta.get("deletionTimestamp") is not None:
            kept[key] = KeepReason.TERMINATING
            continue
        red, since = _red_since(cv)
        if not red:
            kept[key] = KeepReason.NOT_RED
            continue
        if since is None or since > oldest:
            kept[key] = KeepReason.RED_TOO_RECENT
            continue
        labels = meta.get("labels") or {}
        if not isinstance(labels, Mapping) or labels.get(RETAIN_LABEL) == "true":
            kept[key] = KeepReason.RETAINED
            continue
        if namespace in excluded:
            kept[key] = KeepReason.EXCLUDED_NAMESPACE
            continue
        if PROTECTION_FINALIZERS.intersection(finalizers_of(cv)):
            kept[key] = KeepReason.PROTECTED
            continue
        if any(_live_release(r) for r in _releases(view, key)):
            kept[key] = KeepReason.REFERENCED
            continue
        component = component_key(cv)
        if not component:
            kept[key] = KeepReason.NO_COMPONENT
            continue
        candidates.append(_Candidate(cv, key, since, component))

    newest = _newest_by_component(view, {c.component for c in candidates}, config.keepLast)
    eligible: list[_Candidate] = []
    for c in candidates:
        if c.key in newest[c.component]:
            kept[c.key] = KeepReason.KEEP_LAST
        else:
            eligible.append(c)
    eligible.sort(key=lambda c: (c.since, c.key))
    for c in eligible[config.maxDeletesPerSweep :]:
        kept[c.key] = KeepReason.OVER_CAP
    deletions = tuple(_deletion(c) for c in eligible[: config.maxDeletesPerSweep])
    return RetentionPlan(deletions, kept)


def _releases(view: View, key: str) -> tuple[Obj, ...]:
    return tuple(view.indexed(RELEASE, RELEASES_BY_COMPONENT_VERSION, key))


def _live_release(release: Obj) -> bool:
    """Not terminating; a Release whose metadata cannot be read counts as live (it may protect)."""
    meta = release.get("metadata")
    return not isinstance(meta, Mapping) or meta.get("deletionTimestamp") is None


def _newest_by_component(view: View, components: set[str], keep_last: int) -> dict[str, frozenset[str]]:
    """For each Component, the ``namespace/name`` of its ``keep_last`` newest live ComponentVersions."""
    out: dict[str, frozenset[str]] = {}
    for component in components:
        live = [
            cv
            for cv in view.indexed(COMPONENT_VERSION, COMPONENT_VERSIONS_BY_COMPONENT, component)
            if _mapping(cv.get("metadata")).get("deletionTimestamp") is None
        ]
        live.sort(key=newness, reverse=True)
        out[component] = frozenset(_key(cv) for cv in live[:keep_last]) if keep_last else frozenset()
    return out


def _key(cv: Obj) -> str:
    meta = _mapping(cv.get("metadata"))
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _deletion(c: _Candidate) -> Deletion:
    meta = _mapping(c.cv.get("metadata"))
    return Deletion(
        key=c.key,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        red_since=c.since,
        component=c.component,
        obj=c.cv,
    )
