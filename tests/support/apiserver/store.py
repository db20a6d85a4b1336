"""The double's etcd: objects in their storage version, one global resourceVersion counter, an event log.

Writes are compare-and-swap on the resourceVersion a caller read (as etcd transactions on ModRevision),
so a request that ran admission on a stale object fails instead of overwriting. The event log keeps a
window of recent changes; a watch that asks for a version older than the window gets 410 Expired,
like a compacted etcd or an outrun watch cache. Tests shrink the window with `compact()`.
"""

from __future__ import annotations

import bisect
import copy
import threading
from dataclasses import dataclass
from typing import Any

ObjectKey = tuple[str, str, str, str]  # group, plural, namespace ("" when cluster-scoped), name


@dataclass(frozen=True)
class Event:
    """One change: ADDED, MODIFIED or DELETED, with the object as stored after (or, for DELETED, at) it."""

    rv: int
    type: str
    key: ObjectKey
    object: dict[str, Any]
    previous: dict[str, Any] | None = None


class Store:
    """Thread-safe object storage with compare-and-swap writes and a bounded change log."""

    def __init__(self, window: int = 100_000) -> None:
        self._objects: dict[ObjectKey, dict[str, Any]] = {}
        self._events: list[Event] = []
        self._rvs: list[int] = []
        self._window = window
        self._rv = 0
        self._compacted = 0  # every event with rv <= this has been dropped
        self.changed = threading.Condition()

    @property
    def resource_version(self) -> int:
        with self.changed:
            return self._rv

    def get(self, key: ObjectKey) -> dict[str, Any] | None:
        with self.changed:
            found = self._objects.get(key)
            return copy.deepcopy(found) if found is not None else None

    def list(self, group: str, plural: str, namespace: str | None) -> tuple[list[dict[str, Any]], int]:
        """Objects of one resource (in one namespace when given), sorted by namespace and name, and the store RV."""
        with self.changed:
            items = [
                copy.deepcopy(obj)
                for (g, p, ns, _n), obj in sorted(self._objects.items())
                if g == group and p == plural and (namespace is None or ns == namespace)
            ]
            return items, self._rv

    def snapshot(self) -> dict[ObjectKey, dict[str, Any]]:
        """A shallow copy of all objects; callers must not mutate the values (controllers only read)."""
        with self.changed:
            return dict(self._objects)

    def write(self, key: ObjectKey, obj: dict[str, Any] | None, expected_rv: str | None) -> dict[str, Any] | None:
        """Store `obj` (None deletes) if the current object's resourceVersion is `expected_rv`.

        `expected_rv` None means "must not exist" (create). Returns the stored object (with its new
        resourceVersion), or None when the precondition failed; the caller decides how to report it.
        """
        with self.changed:
            current = self._objects.get(key)
            current_rv = current["metadata"]["resourceVersion"] if current is not None else None
            if current_rv != expected_rv:
                return None
            self._rv += 1
            if obj is None:
                assert current is not None
                stored = copy.deepcopy(current)
                stored["metadata"]["resourceVersion"] = str(self._rv)
                del self._objects[key]
                self._append(Event(self._rv, "DELETED", key, stored, current))
            else:
                stored = copy.deepcopy(obj)
                stored["metadata"]["resourceVersion"] = str(self._rv)
                self._objects[key] = stored  # never mutated in place: events may share it
                self._append(Event(self._rv, "ADDED" if current is None else "MODIFIED", key, stored, current))
            self.changed.notify_all()
            return copy.deepcopy(stored)

    def _append(self, event: Event) -> None:
        self._events.append(event)
        self._rvs.append(event.rv)
        self._trim(self._window)

    def _trim(self, keep: int) -> None:
        drop = len(self._events) - keep
        if drop > 0:
            self._compacted = self._rvs[drop - 1]
            del self._events[:drop]
            del self._rvs[:drop]

    def compact(self, keep: int = 0) -> None:
        """Drop all but the last `keep` events now, as an etcd compaction does; later events are kept as usual."""
        with self.changed:
            self._trim(keep)
            if keep == 0:
                self._compacted = self._rv
            self.changed.notify_all()

    def set_window(self, size: int) -> None:
        """Keep at most `size` events from now on (a small watch cache: slow watchers then get 410)."""
        with self.changed:
            self._window = size
            self._trim(size)

    def oldest_available(self) -> int:
        """The oldest resourceVersion a watch may start from (kube reports it in the 410 message)."""
        with self.changed:
            return self._compacted

    def events_after(self, rv: int) -> list[Event] | None:
        """Events with rv greater than `rv`, or None if some of them were already dropped (410)."""
        with self.changed:
            if rv < self._compacted:
                return None
            return self._events[bisect.bisect_right(self._rvs, rv) :]
