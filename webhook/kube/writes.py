"""The writes the sidecar loops make, each safe against a cluster that changed since it was read.

- :meth:`Writer.patch_status`: a merge patch of only the status fields that differ, sent to the
  status subresource (or the object, for kinds without one); nothing at all is sent when nothing
  differs ("every write is a patch of what changed, nothing when nothing changed", DESIGN.md 6).
- :meth:`Writer.delete_if_unchanged`: a delete carrying the uid and resourceVersion the caller
  evaluated; a lost race is an ordinary outcome (``SKIPPED_CONFLICT``), not an exception, so the
  janitor skips the object until its next sweep.
- :meth:`Writer.remove_finalizer`: optimistic concurrency: a merge patch carrying the
  resourceVersion it was computed from (the apiserver answers 409 if the object moved on), re-read
  and retried a bounded number of times.
- :meth:`Writer.emit_event`: a core/v1 Event about an object, reported by ``catalog-warden``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from policies.kinds import EVENT
from policies.model import GroupKind, Obj
from webhook.kube.client import MERGE_PATCH, Conflict, Kube, NotFound

REPORTING_CONTROLLER = "catalog-warden"
EVENT_MESSAGE_LIMIT = 1024
"""Bytes; events.k8s.io caps ``note`` at 1 KiB and core/v1 consumers display about as much."""


class DeleteResult(StrEnum):
    DELETED = "Deleted"
    """The delete was accepted (the object is gone, or terminating behind its finalizers)."""
    SKIPPED_CONFLICT = "SkippedConflict"
    """The object changed (resourceVersion) or was replaced (uid) since it was evaluated."""
    GONE = "Gone"
    """The object no longer exists."""


class FinalizerResult(StrEnum):
    REMOVED = "Removed"
    ABSENT = "Absent"
    """The finalizer was not (or no longer) on the object: nothing to do."""
    GONE = "Gone"
    """The object no longer exists, or a new object with another uid took its name."""
    KEPT = "Kept"
    """After a lost race, the re-read object no longer allows the removal (``still_allowed``)."""


def merge_patch(current: Any, desired: Any) -> Any:
    """The RFC 7386 merge patch turning ``current`` into ``desired`` (``{}`` when they are equal).

    Objects are diffed key by key (a removed key becomes ``null``); anything else, lists
    included, is replaced whole, which is what a merge patch can express.
    """
    if not isinstance(current, Mapping) or not isinstance(desired, Mapping):
        return desired
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    for key, value in desired.items():
        if key not in current:
            patch[key] = value
        elif current[key] != value:
            patch[key] = merge_patch(current[key], value)
    return patch


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors="ignore")


class Writer:
    """Write primitives over one :class:`Kube`. ``clock`` stamps Events (the shell's one clock)."""

    def __init__(
        self,
        kube: Kube,
        *,
        instance: str = "",
        finalizer_attempts: int = 5,
        timeout: float = 10.0,
        clock: Callable[[], datetime.datetime] = _utc_now,
    ) -> None:
        self.kube = kube
        self.instance = instance
        self.finalizer_attempts = finalizer_attempts
        self.timeout = timeout
        self.clock = clock

    def patch_status(self, kind: GroupKind, obj: Obj, desired_status: Mapping[str, Any]) -> Obj | None:
        """Merge-patch ``status`` from what ``obj`` holds to ``desired_status``.

        Returns the written object, or None (and sends nothing) when nothing differs. The patch
        carries the resourceVersion ``obj`` was read at, so a decision made from a stale read is
        refused (``Conflict``) and taken again from fresh state, never written over newer data.
        Sent to the status subresource where the kind has one, else to the object itself
        (ComponentVersion: no status subresource, as on the aggregated API).
        """
        patch = merge_patch(obj.get("status") or {}, dict(desired_status))
        if not patch:
            return None
        meta = _meta(obj)
        return self.kube.patch(
            kind,
            str(meta["name"]),
            str(meta.get("namespace", "")),
            {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": patch},
            MERGE_PATCH,
            subresource="status" if self.kube.resource(kind).status_subresource else "",
            timeout=self.timeout,
        )

    def delete_if_unchanged(self, kind: GroupKind, obj: Obj) -> DeleteResult:
        """Delete ``obj`` only if it still has the uid and resourceVersion it was evaluated at."""
        meta = _meta(obj)
        preconditions = {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
        try:
            self.kube.delete(
                kind,
                str(meta["name"]),
                str(meta.get("namespace", "")),
                {"preconditions": preconditions, "propagationPolicy": "Background"},
                timeout=self.timeout,
            )
        except Conflict:
            return DeleteResult.SKIPPED_CONFLICT
        except NotFound:
            return DeleteResult.GONE
        return DeleteResult.DELETED

    def remove_finalizer(
        self, kind: GroupKind, obj: Obj, name: str, still_allowed: Callable[[Obj], bool] | None = None
    ) -> FinalizerResult:
        """Remove finalizer ``name``; retried on 409 from a fresh read, at most ``finalizer_attempts`` times.

        ``still_allowed`` re-judges each fresh read: the race that was lost may have been a change
        that forbids the removal (e.g. a revision moved back to Published), and then nothing is sent.
        Raises :class:`Conflict` when every attempt lost a race (the caller retries next pass).
        """
        meta = _meta(obj)
        uid, obj_name, namespace = meta.get("uid"), str(meta["name"]), str(meta.get("namespace", ""))
        current: Obj = obj
        for attempt in range(self.finalizer_attempts):
            if attempt:
                try:
                    current = self.kube.get(kind, obj_name, namespace, timeout=self.timeout)
                except NotFound:
                    return FinalizerResult.GONE
                if uid and _meta(current).get("uid") != uid:
                    return FinalizerResult.GONE
                if still_allowed is not None and not still_allowed(current):
                    return FinalizerResult.KEPT
            finalizers = list(_meta(current).get("finalizers") or ())
            if name not in finalizers:
                return FinalizerResult.ABSENT
            remaining = [f for f in finalizers if f != name]
            patch = {"metadata": {"resourceVersion": _meta(current)["resourceVersion"], "finalizers": remaining}}
            try:
                self.kube.patch(kind, obj_name, namespace, patch, MERGE_PATCH, timeout=self.timeout)
            except NotFound:
                return FinalizerResult.GONE
            except Conflict:
                if attempt == self.finalizer_attempts - 1:
                    raise
                continue
            return FinalizerResult.REMOVED
        raise AssertionError("unreachable: the last attempt returns or raises")

    def emit_event(self, involved: Obj, reason: str, message: str, type: str = "Normal", action: str = "") -> Obj:
        """Create a core/v1 Event about ``involved`` (in its namespace, ``default`` when cluster-scoped).

        The legacy core/v1 shape client-go's recorder writes (timestamps and count, no
        ``eventTime``), so the apiserver applies the lenient core/v1 validation; the reporter is in
        ``source.component`` and ``reportingComponent`` (core/v1's name for reportingController).
        """
        meta = _meta(involved)
        now = self.clock().astimezone(datetime.UTC)
        namespace = str(meta.get("namespace") or "default")
        ref = {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        seconds = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'object')}.{int(now.timestamp() * 1e9):x}",
                "namespace": namespace,
            },
            "involvedObject": {k: v for k, v in ref.items() if v},
            "reason": reason,
            "message": _cut(message, EVENT_MESSAGE_LIMIT),
            "type": type,
            "action": action or reason,
            "source": {"component": REPORTING_CONTROLLER},
            "reportingComponent": REPORTING_CONTROLLER,
            "reportingInstance": self.instance,
            "firstTimestamp": seconds,
            "lastTimestamp": seconds,
            "count": 1,
        }
        return self.kube.create(EVENT, event, timeout=self.timeout)
