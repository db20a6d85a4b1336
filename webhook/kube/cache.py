"""The informer cache: list then watch each kind the rules read, and serve it as a :class:`View`.

One reflector thread per kind does what client-go's reflector does: a paginated list (replacing
the kind's content and remembering the list's resourceVersion), then a watch from that version
with ``allowWatchBookmarks``; each event (or bookmark) advances the version, so a watch that ends
(server timeout, dropped connection) resumes where it stopped without a relist. Only ``410 Gone``
(the version fell out of the server's window) forces a relist. Errors back off and retry; the
cache never gives up while it runs.

The backing store is a :class:`~policies.view.MemoryView` built with every family's indexes;
objects are kept as the decoded dicts the apiserver sent, minus ``metadata.managedFields`` (as
controller-runtime's default transform does: large, and no rule reads it). ``synced`` turns true
once every kind has been listed once and stays true across relists (as client-go's HasSynced).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from policies.families import INDEXES
from policies.kinds import CATALOG_KINDS, CHARTS_KINDS, PACKAGES_KINDS
from policies.model import GroupKind, Obj
from policies.view import Indexes, MemoryView
from webhook.kube.client import ApiError, Gone, Kube, Resource, WatchStream, error_from_status

log = logging.getLogger("catalog_warden.cache")

DEFAULT_KINDS: frozenset[GroupKind] = CATALOG_KINDS | PACKAGES_KINDS | CHARTS_KINDS
"""Every kind a rule may read: all three families' kinds."""


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop what no rule reads and costs the most memory (``metadata.managedFields``), in place."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


class _Reflector:
    """List + watch for one kind into the shared store; runs in its own thread until stopped."""

    def __init__(self, cache: InformerCache, resource: Resource) -> None:
        self.cache = cache
        self.resource = resource
        self.kind = resource.kind
        self.resource_version = ""
        self.relists = 0
        self.watches = 0
        self.listed = False
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, name=f"informer-{resource.plural}", daemon=True)

    def run(self) -> None:
        cache = self.cache
        delay = cache.backoff[0]
        while not cache.stopping.is_set():
            try:
                if not self.resource_version:
                    self.list()
                self.watch()
                delay = cache.backoff[0]
            except Gone:
                log.info("watch expired, relisting", extra={"fields": {"kind": str(self.kind)}})
                self.resource_version = ""
                self.relists += 1
            except (ApiError, ValueError) as exc:
                if cache.stopping.is_set():
                    return
                log.warning("list/watch failed", extra={"fields": {"kind": str(self.kind), "error": str(exc)}})
                cache.stopping.wait(delay)
                delay = min(delay * 2, cache.backoff[1])

    def list(self) -> None:
        """A paginated list; its resourceVersion is where the watch starts."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [("limit", str(self.cache.page_size))] + ([("continue", token)] if token else [])
            page = self.cache.kube.list(self.kind, query=query, timeout=self.cache.request_timeout)
            for item in page.get("items") or ():
                item.setdefault("apiVersion", self.resource.api_version)
                item.setdefault("kind", self.kind.kind)
                items.append(slim(item))
            metadata = page.get("metadata") or {}
            token = str(metadata.get("continue") or "")
            if not token:
                break
        self.cache.store.replace(self.kind, items)
        self.resource_version = str(metadata.get("resourceVersion") or "")
        if not self.listed:
            self.listed = True
            self.cache._kind_listed()

    def watch(self) -> None:
        """One watch request, applied until the server ends it (returns) or it expires (raises Gone)."""
        cache = self.cache
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(int(cache.watch_timeout))),
        ]
        stream = cache.kube.stream(
            self.resource.path(), query, timeout=(cache.request_timeout, cache.watch_timeout + cache.request_timeout)
        )
        with self._lock:
            if cache.stopping.is_set():
                stream.close()
            self._stream = stream
        self.watches += 1
        try:
            for event in stream:
                if cache.stopping.is_set():
                    return
                self.resource_version = cache.apply(self.kind, event) or self.resource_version
        finally:
            with self._lock:
                self._stream = None
            stream.close()

    def stop(self) -> None:
        with self._lock:
            if self._stream is not None:
                self._stream.close()


class InformerCache:
    """A :class:`~policies.view.View` of the cluster, kept current by list + watch per kind.

    ``start()`` launches the reflectors and returns; ``wait_synced()`` blocks until every kind
    has been listed; ``stop()`` cuts the watches and joins the threads. Reads never touch the
    network: they are served from the in-memory store.
    """

    def __init__(
        self,
        kube: Kube,
        kinds: Iterable[GroupKind] = DEFAULT_KINDS,
        *,
        indexes: Indexes = INDEXES,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        request_timeout: float = 30.0,
        backoff: tuple[float, float] = (0.2, 10.0),
    ) -> None:
        self.kube = kube
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.request_timeout = request_timeout
        self.backoff = backoff
        self.store = MemoryView(indexes, synced=False)
        self.stopping = threading.Event()
        self._synced_event = threading.Event()
        self._reflectors: dict[GroupKind, _Reflector] = {
            kind: _Reflector(self, kube.resource(kind)) for kind in sorted(set(kinds), key=str)
        }
        self._listed = 0
        self._listed_lock = threading.Lock()

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> InformerCache:
        for reflector in self._reflectors.values():
            reflector.thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        for reflector in self._reflectors.values():
            reflector.stop()
        for reflector in self._reflectors.values():
            if reflector.thread.is_alive():
                reflector.thread.join(timeout)

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced_event.wait(timeout)

    def _kind_listed(self) -> None:
        with self._listed_lock:
            self._listed += 1
            if self._listed == len(self._reflectors):
                self.store.mark_synced(True)
                self._synced_event.set()
                log.info("cache synced", extra={"fields": {"kinds": self._listed}})

    # ---- events ------------------------------------------------------------------------------

    def apply(self, kind: GroupKind, event: Mapping[str, Any]) -> str:
        """Apply one watch event to the store; returns the resourceVersion it carries ("" if none).

        An ERROR event raises (``Gone`` for 410, so the reflector relists). Public so the
        benchmark can measure the store without a network.
        """
        kind_of_event = event.get("type")
        obj = event.get("object") or {}
        if kind_of_event == "ERROR":
            raise error_from_status(int(obj.get("code") or 500), obj)
        metadata = obj.get("metadata") or {}
        if kind_of_event in ("ADDED", "MODIFIED"):
            self.store.put(kind, slim(obj))
        elif kind_of_event == "DELETED":
            self.store.remove(kind, str(metadata.get("name", "")), str(metadata.get("namespace", "")))
        elif kind_of_event != "BOOKMARK":
            raise ValueError(f"unknown watch event type {kind_of_event!r} for {kind}")
        return str(metadata.get("resourceVersion") or "")

    # ---- introspection (tests, metrics) ------------------------------------------------------

    def kinds(self) -> Sequence[GroupKind]:
        return tuple(self._reflectors)

    def resource_version(self, kind: GroupKind) -> str:
        return self._reflectors[kind].resource_version

    def relists(self, kind: GroupKind) -> int:
        return self._reflectors[kind].relists

    def watches(self, kind: GroupKind) -> int:
        return self._reflectors[kind].watches

    # ---- View --------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self.store.synced

    def get(self, kind: GroupKind, name: str, namespace: str = "") -> Obj | None:
        return self.store.get(kind, name, namespace)

    def list(
        self, kind: GroupKind, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> Sequence[Obj]:
        return self.store.list(kind, namespace, labels)

    def indexed(self, kind: GroupKind, index: str, key: str) -> Sequence[Obj]:
        return self.store.indexed(kind, index, key)
