"""Package revision bookkeeping: what the sidecar writes on the PackageRevisions of one package.

Porch's PackageRevision controller keeps this state on v1alpha2 (seed 003, reference A4, A5, A7);
where it does not run, the warden keeps it. A package is one (namespace, ``spec.repository``,
``spec.packageName``). From its revisions as the cache holds them, and the time, this module
computes the writes, and nothing when the package is in its steady state:

==================  ========================================================================
write               when
==================  ========================================================================
revision number     a live published revision (Published or DeletionProposed, porch's
                    ``LifecycleIsPublished``) without ``status.revision`` gets the highest
                    published number of its package + 1 (several at once: in publish order)
publish record      the annotations ``catalog-warden.io/published-by`` / ``-at`` (written by
                    the mutating webhook on the way into Published) move into
                    ``status.publishedBy`` / ``status.publishedAt`` and are dropped; a number
                    assigned without any record of the time gets ``publishedAt`` = now
latest label        ``porch.kpt.dev/latest-revision`` (the storage key) is ``"true"`` on exactly
                    the live published revision with the highest number, ``"false"`` on every
                    other live revision; a terminating revision is never latest, and one
                    that stays (blocked, or held by another finalizer) loses a ``"true"``
finalizer           ``porch.kpt.dev/packagerevisions`` is released from a terminating revision
                    whose lifecycle is not Published, or whose Repository is gone or was
                    re-created (another uid than its owner reference names)
==================  ========================================================================

Numbers count every published revision still present, terminating ones included, so a number is
never handed out twice while its revision exists. The status write carries the number and the
record together; the shell sends it before the metadata write, so a record is never dropped from
the annotations before it is in status.

A malformed revision (a string where a mapping belongs) never stops the pass for the other
packages: labels, annotations or a status that are not mappings read as empty (and are replaced by
the writes), owner references that cannot be read name no uid (so the finalizer stays while a
Repository of that name exists).

Pure: no I/O, no clock (``now`` comes in).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from policies.kinds import PACKAGE_REVISION
from policies.model import Obj
from policies.objects import (
    dig,
    finalizers_of,
    format_time,
    is_terminating,
    name_of,
    namespace_of,
)
from policies.packages import (
    FINALIZER,
    LATEST_LABEL_V1ALPHA2,
    PUBLISHED_AT,
    PUBLISHED_BY,
    PUBLISHED_LIFECYCLES,
    Lifecycle,
    lifecycle_of,
    own_repository,
)
from policies.rules import Context
from policies.view import View

LATEST_LABEL = LATEST_LABEL_V1ALPHA2
"""The storage version's key; the conversion webhook shows it as ``kpt.dev/latest-revision`` on v1alpha1."""

RECORD_FIELDS: Mapping[str, str] = {PUBLISHED_BY: "publishedBy", PUBLISHED_AT: "publishedAt"}
"""Publish-record annotation -> the v1alpha2 status field it moves into."""

_EMPTY: Mapping[str, Any] = {}


def _mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else empty: one malformed field must not stop the pass."""
    return value if isinstance(value, Mapping) else _EMPTY


def _labels(revision: Obj) -> Mapping[str, Any]:
    return _mapping(dig(revision, "metadata", "labels"))


def _annotations(revision: Obj) -> Mapping[str, Any]:
    return _mapping(dig(revision, "metadata", "annotations"))


def _with_readable_owners(revision: Obj) -> Obj:
    """``revision`` with only the owner references that are mappings (others name no uid)."""
    owners = dig(revision, "metadata", "ownerReferences", default=())
    if isinstance(owners, list) and all(isinstance(o, Mapping) for o in owners):
        return revision
    readable = [o for o in owners if isinstance(o, Mapping)] if isinstance(owners, list) else []
    return {**revision, "metadata": {**revision["metadata"], "ownerReferences": readable}}


PackageKey = tuple[str, str, str]
"""(namespace, ``spec.repository``, ``spec.packageName``)."""


@dataclass(frozen=True)
class RevisionWrites:
    """The writes for one revision, each None (or False) when nothing is to change.

    ``status`` is the whole desired status (the shell diffs it against ``obj``'s); ``metadata`` is
    a merge patch of ``metadata`` (labels to set, annotations to drop as ``None``).
    """

    obj: Obj
    status: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] | None = None
    release_finalizer: bool = False

    @property
    def key(self) -> str:
        return f"{namespace_of(self.obj)}/{name_of(self.obj)}"

    @property
    def empty(self) -> bool:
        return self.status is None and self.metadata is None and not self.release_finalizer


@dataclass(frozen=True)
class PackageWrites:
    """Everything to write for one package, in the order the shell applies it (revisions by name)."""

    package: PackageKey
    revisions: tuple[RevisionWrites, ...]


def package_key(revision: Obj) -> PackageKey:
    return (
        namespace_of(revision),
        str(dig(revision, "spec", "repository", default="")),
        str(dig(revision, "spec", "packageName", default="")),
    )


def revision_number(revision: Obj) -> int:
    """``status.revision`` when it is a positive integer, else 0 (not numbered yet)."""
    value = dig(revision, "status", "revision")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def is_published(revision: Obj) -> bool:
    return lifecycle_of(revision) in PUBLISHED_LIFECYCLES


def _publish_order(revision: Obj) -> tuple[str, str, str]:
    """Who was published first gets the lower number: record time, then creation, then name."""
    when = str(_annotations(revision).get(PUBLISHED_AT) or dig(revision, "status", "publishedAt", default=""))
    return (when, str(dig(revision, "metadata", "creationTimestamp", default="")), name_of(revision))


def assign_numbers(revisions: Sequence[Obj]) -> dict[str, int]:
    """Name -> the number each live, published, unnumbered revision gets (A5: highest + 1)."""
    highest = max((revision_number(r) for r in revisions if is_published(r)), default=0)
    waiting = sorted(
        (r for r in revisions if is_published(r) and not is_terminating(r) and not revision_number(r)),
        key=_publish_order,
    )
    return {name_of(r): highest + i for i, r in enumerate(waiting, start=1)}


def latest_name(revisions: Sequence[Obj], assigned: Mapping[str, int]) -> str | None:
    """The live published revision with the highest number (counting the ones just assigned)."""
    numbered = [
        (assigned.get(name_of(r)) or revision_number(r), name_of(r))
        for r in revisions
        if is_published(r) and not is_terminating(r)
    ]
    numbered = [(n, name) for n, name in numbered if n > 0]
    return max(numbered)[1] if numbered else None


def releases_finalizer(revision: Obj, view: View, now: datetime) -> bool:
    """A terminating revision may go unless it is Published and its own Repository still exists (A7).

    A Repository itself being deleted counts as gone: a foreground cascade (``kubectl delete
    --cascade=foreground``) keeps it until its dependents are gone (the owner reference blocks
    owner deletion), so holding the revisions until the Repository is gone would hold both forever.
    """
    if not is_terminating(revision) or FINALIZER not in finalizers_of(revision):
        return False
    if lifecycle_of(revision) is not Lifecycle.PUBLISHED:
        return True
    repo = own_repository(_with_readable_owners(revision), Context(view=view, now=now))
    return repo is None or is_terminating(repo)


def _desired_status(revision: Obj, number: int | None, now: datetime) -> Mapping[str, Any] | None:
    current = _mapping(dig(revision, "status"))
    desired = dict(current)
    if number is not None:
        desired["revision"] = number
    annotations = _annotations(revision)
    for annotation, field in RECORD_FIELDS.items():
        if annotation in annotations and field not in current:
            desired[field] = annotations[annotation]
    if number is not None and "publishedAt" not in desired:
        desired["publishedAt"] = format_time(now)
    return desired if desired != current else None


def _metadata_patch(revision: Obj, latest: bool) -> Mapping[str, Any] | None:
    patch: dict[str, Any] = {}
    wanted = "true" if latest else "false"
    if _labels(revision).get(LATEST_LABEL) != wanted:
        patch["labels"] = {LATEST_LABEL: wanted}
    dropped = {a: None for a in RECORD_FIELDS if a in _annotations(revision)}
    if dropped and is_published(revision):
        patch["annotations"] = dropped
    return patch or None


_LATEST_FALSE: Mapping[str, Any] = {"labels": {LATEST_LABEL: "false"}}


def package_writes(revisions: Sequence[Obj], view: View, now: datetime) -> tuple[RevisionWrites, ...]:
    """The writes for the revisions of ONE package (``view`` answers whether its Repository exists)."""
    assigned = assign_numbers(revisions)
    latest = latest_name(revisions, assigned)
    writes: list[RevisionWrites] = []
    for revision in sorted(revisions, key=name_of):
        name = name_of(revision)
        if is_terminating(revision):
            release = releases_finalizer(revision, view, now)
            # one that stays (blocked, or held by another finalizer) must not keep a second "true"
            stays = None if release or _labels(revision).get(LATEST_LABEL) != "true" else _LATEST_FALSE
            write = RevisionWrites(revision, metadata=stays, release_finalizer=release)
        else:
            status = _desired_status(revision, assigned.get(name), now) if is_published(revision) else None
            write = RevisionWrites(revision, status=status, metadata=_metadata_patch(revision, name == latest))
        if not write.empty:
            writes.append(write)
    return tuple(writes)


def group_by_package(revisions: Iterable[Obj]) -> dict[PackageKey, list[Obj]]:
    groups: dict[PackageKey, list[Obj]] = {}
    for revision in revisions:
        groups.setdefault(package_key(revision), []).append(revision)
    return groups


def plan(view: View, now: datetime) -> tuple[PackageWrites, ...]:
    """Every package's writes, packages in key order; packages in their steady state are left out."""
    groups = group_by_package(view.list(PACKAGE_REVISION))
    planned = (PackageWrites(key, package_writes(groups[key], view, now)) for key in sorted(groups))
    return tuple(p for p in planned if p.revisions)
