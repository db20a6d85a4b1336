"""The read-only view of cluster state that rules consult, and its in-memory implementation.

Rules never call the apiserver. They ask a :class:`View`: get one object, list by namespace and
labels, or look up a reverse index ("Releases referencing this ComponentVersion"). Index
functions are pure and declared beside the rules that need them (``INDEXES`` in each family
module), so every view implementation (YAML state directory, informer cache, tests) maintains
the same indexes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from policies.model import GroupKind, Obj
from policies.objects import labels_of, name_of, namespace_of

IndexFn = Callable[[Obj], Iterable[str]]
"""Maps an object to the index keys it should be found under (pure)."""

Indexes = Mapping[GroupKind, Mapping[str, IndexFn]]


class View(Protocol):
    """What a rule may read. Implementations return shared objects: never mutate them."""

    @property
    def synced(self) -> bool:
        """False until the backing store has a complete picture (rules needing it fail closed)."""
        ...

    def get(self, kind: GroupKind, name: str, namespace: str = "") -> Obj | None: ...

    def list(
        self, kind: GroupKind, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> Sequence[Obj]:
        """Objects of ``kind``; ``namespace=None`` means all namespaces; ``labels`` must all match."""
        ...

    def indexed(self, kind: GroupKind, index: str, key: str) -> Sequence[Obj]:
        """Objects of ``kind`` whose index function ``index`` yields ``key``."""
        ...


@runtime_checkable
class Staleness(Protocol):
    """A view that can say which of its parts are stale (the informer cache: kinds whose watch is down).

    The shell uses it to word a 503 and a readiness answer; rules only ever see ``synced``.
    """

    def staleness(self) -> str:
        """The stale parts and since when; ``""`` when none is (a view not yet synced is not stale)."""
        ...


def staleness_of(view: object) -> str:
    """``view.staleness()`` for a view that reports it, else ``""``."""
    return view.staleness() if isinstance(view, Staleness) else ""


@runtime_checkable
class Pending(Protocol):
    """A view that can say which of its parts it has not loaded yet, and why (the informer cache:
    kinds not listed yet, with the error of the last attempt, such as a 403 for a missing verb)."""

    def pending(self) -> str:
        """The parts not loaded yet and why; ``""`` when every part is loaded."""
        ...


def pending_of(view: object) -> str:
    """``view.pending()`` for a view that reports it, else ``""``."""
    return view.pending() if isinstance(view, Pending) else ""


def not_synced_reason(view: View) -> str:
    """Why ``view`` may not be relied on, as readiness answers say it; ``""`` while it is synced."""
    if view.synced:
        return ""
    stale = staleness_of(view)
    if stale:
        return f"cluster state stale: {stale}"
    pending = pending_of(view)
    return f"cluster state not synced: {pending}" if pending else "cluster state not synced"


def _key(namespace: str, name: str) -> tuple[str, str]:
    return (namespace, name)


class MemoryView:
    """A thread-safe in-memory store implementing :class:`View`.

    Used for ``--state`` directories, for tests, and as the informer cache's store. Writers call
    :meth:`put` and :meth:`remove`; each keeps the declared indexes current. Reads are lock-free
    snapshots of immutable tuples, so a rule never sees a half-applied write.
    """

    def __init__(self, indexes: Indexes | None = None, *, synced: bool = True) -> None:
        self._indexes: Indexes = indexes or {}
        self._objects: dict[GroupKind, dict[tuple[str, str], Obj]] = {}
        self._index_data: dict[tuple[GroupKind, str], dict[str, dict[tuple[str, str], Obj]]] = {}
        self._lock = threading.Lock()
        self._synced = synced

    @property
    def synced(self) -> bool:
        return self._synced

    def mark_synced(self, synced: bool = True) -> None:
        self._synced = synced

    def get(self, kind: GroupKind, name: str, namespace: str = "") -> Obj | None:
        return self._objects.get(kind, {}).get(_key(namespace, name))

    def list(
        self, kind: GroupKind, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> Sequence[Obj]:
        objs: Iterable[Obj] = tuple(self._objects.get(kind, {}).values())
        if namespace is not None:
            objs = (o for o in objs if namespace_of(o) == namespace)
        if labels:
            objs = (o for o in objs if _labels_match(labels_of(o), labels))
        return tuple(objs)

    def indexed(self, kind: GroupKind, index: str, key: str) -> Sequence[Obj]:
        if index not in self._indexes.get(kind, {}):
            raise KeyError(f"no index {index!r} declared for {kind}")
        return tuple(self._index_data.get((kind, index), {}).get(key, {}).values())

    def kinds(self) -> Sequence[GroupKind]:
        return tuple(self._objects)

    def put(self, kind: GroupKind, obj: Obj) -> None:
        """Insert or replace ``obj`` (by namespace and name) and re-index it.

        New index entries are added before stale ones are dropped, so a concurrent reader never
        misses an object whose index key did not change (e.g. a Release still referencing a
        ComponentVersion must not vanish from "Releases of this ComponentVersion" mid-update).
        """
        k = _key(namespace_of(obj), name_of(obj))
        with self._lock:
            store = self._objects.setdefault(kind, {})
            old = store.get(k)
            store[k] = obj
            for index, fn in self._indexes.get(kind, {}).items():
                data = self._index_data.setdefault((kind, index), {})
                keys = set(fn(obj))
                for key in keys:
                    data.setdefault(key, {})[k] = obj
                if old is not None:
                    for key in set(fn(old)) - keys:
                        _drop(data, key, k)

    def remove(self, kind: GroupKind, name: str, namespace: str = "") -> Obj | None:
        k = _key(namespace, name)
        with self._lock:
            old = self._objects.get(kind, {}).pop(k, None)
            if old is not None:
                self._unindex(kind, k, old)
            return old

    def replace(self, kind: GroupKind, objs: Iterable[Obj]) -> None:
        """Swap the whole content of ``kind`` (a relist after a watch expired).

        The new content and indexes are built aside and swapped in, so a reader sees either the
        old or the new state, never an empty one in between.
        """
        objects = {_key(namespace_of(o), name_of(o)): o for o in objs}
        index_data: dict[tuple[GroupKind, str], dict[str, dict[tuple[str, str], Obj]]] = {}
        for index, fn in self._indexes.get(kind, {}).items():
            data: dict[str, dict[tuple[str, str], Obj]] = {}
            for k, o in objects.items():
                for key in fn(o):
                    data.setdefault(key, {})[k] = o
            index_data[(kind, index)] = data
        with self._lock:
            self._index_data.update(index_data)
            self._objects[kind] = objects

    def _unindex(self, kind: GroupKind, k: tuple[str, str], obj: Obj) -> None:
        for index, fn in self._indexes.get(kind, {}).items():
            data = self._index_data.get((kind, index), {})
            for key in fn(obj):
                _drop(data, key, k)


def _drop(data: dict[str, dict[tuple[str, str], Obj]], key: str, k: tuple[str, str]) -> None:
    bucket = data.get(key)
    if bucket is not None:
        bucket.pop(k, None)
        if not bucket:
            del data[key]


def _labels_match(have: Mapping[str, str], want: Mapping[str, str]) -> bool:
    return all(have.get(k) == v for k, v in want.items())
