"""The informer cache: list then watch each kind the rules read, and serve it as a :class:`View`.

One reflector thread per kind does what client-go's reflector does: a paginated list (replacing
the kind's content and remembering the list's resourceVersion), then a watch from that version
with ``allowWatchBookmarks``; each event (or bookmark) advances the version, so a watch the server
ends cleanly (``timeoutSeconds``) resumes where it stopped without a relist. Any error (410 Gone, an
ERROR event, an HTTP error, a reset or half-open connection, an undecodable line) relists, after a
capped exponential backoff except for 410; the thread never exits while the cache runs.

*Live* means what a rule may trust (DESIGN.md section 4, docs/operations.md "Readiness"). A kind is
live once listed and while either its watch is open and has been heard from within
``watch_timeout + max_watch_gap`` (the server ends every watch within ``timeoutSeconds`` and
bookmarks come only sometimes, so a longer silence is a dead connection; the stream's read
timeout is the same bound, so such a watch errors and relists), or it has been down (between
watches, relisting, backing off) for at most ``max_watch_gap``. ``synced`` is true only while
every kind is listed and live: a stale kind makes rules fail closed, readiness false and the
sidecar's loops pause, exactly as before the first sync.

The backing store is a :class:`~policies.view.MemoryView` built with every family's indexes;
objects are kept as the decoded dicts the apiserver sent, minus ``metadata.managedFields`` (as
controller-runtime's default transform does: large, and no rule reads it).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from policies.config import InformerConfig
from policies.families import INDEXES
from policies.kinds import CATALOG_KINDS, CATALOG_RENDER_KINDS, CHARTS_KINDS, PACKAGES_KINDS
from policies.model import GroupKind, Obj
from policies.view import Indexes, MemoryView
from webhook.kube.client import ApiError, Gone, Kube, Resource, WatchStream, error_from_status

log = logging.getLogger("catalog_warden.cache")

DEFAULT_KINDS: frozenset[GroupKind] = (CATALOG_KINDS - CATALOG_RENDER_KINDS) | PACKAGES_KINDS | CHARTS_KINDS
"""Every kind a rule may read: the three families' kinds, less SolAr's render bookkeeping (no rule reads it)."""

DEFAULTS = InformerConfig()


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop what no rule reads and costs the most memory (``metadata.managedFields``), in place."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


class Liveness(enum.Enum):
    """A kind's state as readiness and a 503 describe it; the value is the sentence (``{since}``)."""

    LIVE = "live"
    UNLISTED = "not listed yet"
    DOWN = "watch down since {since}"
    SILENT = "watch silent since {since}"


STALE = frozenset({Liveness.DOWN, Liveness.SILENT})


@dataclass(frozen=True, slots=True)
class KindLiveness:
    """One kind's liveness; ``since`` is when its watch went down or was last heard from."""

    kind: GroupKind
    state: Liveness
    since: datetime | None = None
    error: str = ""
    """Why the last list or watch failed: a kind never listed says it (a 403 names the missing verb)."""

    @property
    def stale(self) -> bool:
        return self.state in STALE

    def describe(self) -> str:
        since = self.since.strftime("%Y-%m-%dT%H:%M:%SZ") if self.since else ""
        why = f" ({self.error})" if self.error and self.state is Liveness.UNLISTED else ""
        return f"{self.kind} {self.state.value.format(since=since)}{why}"


class _Reflector:
    """List + watch for one kind into the shared store; runs in its own thread until stopped.

    Liveness is three monotonic instants written by this thread and read by any: ``heard`` (the
    watch opened or delivered an event), ``down_since`` (the last watch ended) and ``stale_at``
    (the kind is live while the clock is before it). Going down never moves ``stale_at`` later,
    so a watch that dies after a long silence is stale at once rather than given a fresh gap.
    """

    def __init__(self, cache: InformerCache, resource: Resource) -> None:
        self.cache = cache
        self.resource = resource
        self.kind = resource.kind
        self.resource_version = ""
        self.relists = 0
        self.watches = 0
        self.failures = 0
        self.last_error = ""
        self.listed = False
        self.watching = False
        self.heard = 0.0
        self.down_since = 0.0
        self.stale_at = 0.0
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, name=f"informer-{resource.plural}", daemon=True)

    def run(self) -> None:
        cache = self.cache
        delay = cache.backoff[0]
        self.down_since = time.monotonic()  # no watch yet
        while not cache.stopping.is_set():
            try:
                if not self.resource_version:
                    self.list()
                self.watch()  # returned: the server ended it cleanly, resume from resource_version
                delay = cache.backoff[0]
            except Exception as exc:  # any failure relists: a reflector that exits freezes its kind for good
                if cache.stopping.is_set():
                    return
                self.failures += 1
                self.last_error = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
                self.resource_version = ""
                if isinstance(exc, Gone):
                    log.info("watch expired, relisting", extra={"fields": {"kind": str(self.kind)}})
                else:
                    fields = {"kind": str(self.kind), "error": f"{type(exc).__name__}: {exc}", "retry_in": delay}
                    trace = None if isinstance(exc, ApiError | ValueError) else exc  # unexpected: show where
                    log.warning("list/watch failed, relisting", exc_info=trace, extra={"fields": fields})
                    cache.stopping.wait(delay)
                    delay = min(delay * 2, cache.backoff[1])

    def list(self) -> None:
        """A paginated list; its resourceVersion is where the watch starts."""
        items: list[dict[str, Any]] = []
        token = ""
        if self.listed:
            self.relists += 1
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
        # Just listed: current as of now, whatever the watch does next (within the gap).
        self._stale_at(max(self.stale_at, time.monotonic() + self.cache.max_watch_gap))
        if not self.listed:
            self.listed = True
            self.cache._kind_listed()

    def watch(self) -> None:
        """One watch request, applied until the server ends it (returns) or it fails (raises)."""
        cache = self.cache
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(int(cache.watch_timeout))),
        ]
        # The read timeout is the liveness bound: a watch silent for longer is dead (half-open), and errors.
        stream = cache.kube.stream(self.resource.path(), query, timeout=(cache.request_timeout, cache.liveness_bound))
        with self._lock:
            if cache.stopping.is_set():
                stream.close()
            self._stream = stream
        self.watches += 1
        self.watching = True
        self._heard()
        try:
            for event in stream:
                if cache.stopping.is_set():
                    return
                self.resource_version = cache.apply(self.kind, event) or self.resource_version
                self._heard()
        finally:
            now = time.monotonic()
            self.watching = False
            self.down_since = now
            self._stale_at(min(self.stale_at, now + cache.max_watch_gap))
            with self._lock:
                self._stream = None
            stream.close()

    def _heard(self) -> None:
        self.heard = time.monotonic()
        self._stale_at(self.heard + self.cache.liveness_bound)

    def _stale_at(self, at: float) -> None:
        self.stale_at = at
        self.cache._liveness_changed()

    def liveness(self, now: float, wall: datetime) -> KindLiveness:
        if not self.listed:
            return KindLiveness(self.kind, Liveness.UNLISTED, error=self.last_error)
        if now < self.stale_at:
            return KindLiveness(self.kind, Liveness.LIVE)
        state, at = (Liveness.SILENT, self.heard) if self.watching else (Liveness.DOWN, self.down_since)
        return KindLiveness(self.kind, state, wall - timedelta(seconds=now - at))

    def stop(self) -> None:
        with self._lock:
            if self._stream is not None:
                self._stream.close()


class InformerCache:
    """A :class:`~policies.view.View` of the cluster, kept current by list + watch per kind.

    ``start()`` launches the reflectors and returns; ``wait_synced()`` blocks until every kind
    has been listed; ``stop()`` cuts the watches and joins the threads. Reads never touch the
    network: they are served from the in-memory store. ``max_watch_gap``, ``watch_timeout`` and
    ``request_timeout`` are seconds (docs/configuration.md ``informer.*``; :meth:`configured`).
    """

    def __init__(
        self,
        kube: Kube,
        kinds: Iterable[GroupKind] = DEFAULT_KINDS,
        *,
        indexes: Indexes = INDEXES,
        page_size: int = 500,
        watch_timeout: float = DEFAULTS.watchTimeout.total_seconds(),
        max_watch_gap: float = DEFAULTS.maxWatchGap.total_seconds(),
        request_timeout: float = DEFAULTS.requestTimeout.total_seconds(),
        backoff: tuple[float, float] = (0.2, 10.0),
    ) -> None:
        if watch_timeout < 1:
            raise ValueError(f"watch_timeout must be at least 1 second (timeoutSeconds), not {watch_timeout}")
        self.kube = kube
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.max_watch_gap = max_watch_gap
        self.liveness_bound = watch_timeout + max_watch_gap
        """How long an open watch may be silent before it counts as dead (and its read times out)."""
        self.request_timeout = request_timeout
        self.backoff = backoff
        self.store = MemoryView(indexes, synced=False)
        self.stopping = threading.Event()
        self._synced_event = threading.Event()
        self._reflectors: dict[GroupKind, _Reflector] = {
            kind: _Reflector(self, kube.resource(kind)) for kind in sorted(set(kinds), key=str)
        }
        self._stale_at = 0.0
        """The earliest reflector ``stale_at``: ``synced`` is read on every admission, so it is one comparison."""
        self._stale_lock = threading.Lock()
        self._listed = 0
        self._listed_lock = threading.Lock()

    @classmethod
    def configured(
        cls, kube: Kube, config: InformerConfig, kinds: Iterable[GroupKind] = DEFAULT_KINDS
    ) -> InformerCache:
        """A cache with the bounds of the ``informer:`` configuration section."""
        return cls(
            kube,
            kinds,
            watch_timeout=config.watchTimeout.total_seconds(),
            max_watch_gap=config.maxWatchGap.total_seconds(),
            request_timeout=config.requestTimeout.total_seconds(),
        )

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
        """Block until every kind has been listed once (then ``synced`` holds while all stay live)."""
        return self._synced_event.wait(timeout)

    def _liveness_changed(self) -> None:
        # Under the lock: two reflectors recomputing at once must not let the older minimum win.
        with self._stale_lock:
            self._stale_at = min(r.stale_at for r in self._reflectors.values())

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
        """List attempts of ``kind`` after the first (each follows a failure)."""
        return self._reflectors[kind].relists

    def watches(self, kind: GroupKind) -> int:
        return self._reflectors[kind].watches

    def failures(self, kind: GroupKind) -> int:
        """List or watch attempts of ``kind`` that failed (each one led to a relist)."""
        return self._reflectors[kind].failures

    # ---- liveness (readiness, health, 503 messages) ------------------------------------------

    def liveness(self) -> tuple[KindLiveness, ...]:
        """Every kind's liveness now, in kind order."""
        now, wall = time.monotonic(), datetime.now(UTC)
        return tuple(r.liveness(now, wall) for r in self._reflectors.values())

    def staleness(self) -> str:
        """The stale kinds and since when (``""`` when none is; a kind not yet listed is not stale)."""
        return ", ".join(k.describe() for k in self.liveness() if k.stale)

    def pending(self) -> str:
        """The kinds not listed yet, each with why its last attempt failed (``""`` once all are listed).

        What readiness names while the cache has not synced: a kind the ServiceAccount may not
        list stays here, with the apiserver's 403, rather than a bare "not synced".
        """
        return ", ".join(k.describe() for k in self.liveness() if k.state is Liveness.UNLISTED)

    def dead_threads(self) -> Sequence[GroupKind]:
        """Kinds whose reflector thread has ended although the cache runs (a bug: health says so)."""
        if self.stopping.is_set():
            return ()
        return tuple(k for k, r in self._reflectors.items() if r.thread.ident is not None and not r.thread.is_alive())

    # ---- View --------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """Every kind listed and live: what a rule that reads the cache may rely on."""
        if not self._synced_event.is_set():
            return False
        return time.monotonic() < self._stale_at

    def get(self, kind: GroupKind, name: str, namespace: str = "") -> Obj | None:
        return self.store.get(kind, name, namespace)

    def list(
        self, kind: GroupKind, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> Sequence[Obj]:
        return self.store.list(kind, namespace, labels)

    def indexed(self, kind: GroupKind, index: str, key: str) -> Sequence[Obj]:
        return self.store.indexed(kind, index, key)
