"""Publishing the referenced set: only a complete set, from fresh truth, only when its content changed.

Each pass computes the set (``policies.referenced_set.collect``) from a *fresh* list of
Components and ComponentVersions read from the apiserver just before (:class:`FreshSet`), never
from the informer cache: a cache whose watch was cut, or is behind, would miss an entry created
meanwhile, and its artifact would look unreferenced. The fresh list is taken only while the
cache is live too (``view.synced``: the Registries and Secrets reclamation reads come from it),
and a failed list is an incomplete set. An
:class:`~policies.referenced_set.IncompleteSet` publishes nothing (the last published ConfigMap
stands) and is handed on as is, so reclamation refuses too. A complete set whose keeps equal the
published ones writes nothing; otherwise the ConfigMap is written with the next generation, as
an update carrying the resourceVersion that was read (a create when there is none), so two
writers never both win.

The ConfigMap is read with one GET per pass rather than cached, so a new leader, or an operator
who deleted it, is picked up without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from policies.kinds import COMPONENT, COMPONENT_VERSION, CONFIG_MAP
from policies.model import Obj
from policies.objects import name_of, namespace_of
from policies.referenced_set import CONFIGMAP_KEY, MSG_UNSYNCED, IncompleteSet, ReferencedSet, collect
from policies.sidecar_config import ReferencedSetConfig
from policies.view import View
from webhook.kube.client import Conflict, Kube, NotFound
from webhook.kube.listing import PAGE_SIZE, list_all
from webhook.sidecar.metrics import SidecarMetrics

log = logging.getLogger("catalog_warden.sidecar.referenced_set")

MANAGED_BY = {"app.kubernetes.io/managed-by": "catalog-warden", "app.kubernetes.io/component": "referenced-set"}
TIMEOUT = 10.0
MSG_FRESH_LIST_FAILED = "the fresh list of {kind} failed ({error}); the set would miss entries"


class FreshSet:
    """The referenced set from the apiserver's current truth; blocking (call it in a thread).

    ``view`` is the informer cache: it is not read for entries, only asked whether it is live,
    because everything else a pass decides with (which Registries opted in, their annotations,
    credentials) comes from it. Components are listed before ComponentVersions, so the entries
    are the last thing read; an entry whose Component appeared between the two lists is simply
    unresolved (incomplete), never dropped.
    """

    def __init__(self, kube: Kube, view: View, *, page_size: int = PAGE_SIZE, timeout: float = TIMEOUT) -> None:
        self.kube = kube
        self.view = view
        self.page_size = page_size
        self.timeout = timeout

    def compute(self, generation: int, now: datetime) -> ReferencedSet | IncompleteSet:
        if not self.view.synced:
            return IncompleteSet(now, (MSG_UNSYNCED,))
        listed: dict[str, list[Obj]] = {}
        for kind in (COMPONENT, COMPONENT_VERSION):
            try:
                listed[kind.kind] = list_all(self.kube, kind, page_size=self.page_size, timeout=self.timeout)
            except Exception as exc:  # any failure, typed or not, is an incomplete set: fail closed
                why = MSG_FRESH_LIST_FAILED.format(kind=f"{kind.kind}s", error=f"{type(exc).__name__}: {exc}")
                return IncompleteSet(now, (why,))
        components = {(namespace_of(c), name_of(c)): c for c in listed[COMPONENT.kind]}
        # asked again: the cache may have gone stale while we listed
        return collect(listed[COMPONENT_VERSION.kind], components, generation, now, self.view.synced)


class Publication(StrEnum):
    PUBLISHED = "published"
    UNCHANGED = "unchanged"
    INCOMPLETE = "incomplete"
    CONFLICT = "conflict"
    """Someone else wrote the ConfigMap between our read and our write: nothing is reclaimed this pass."""


@dataclass(frozen=True, slots=True)
class PublishResult:
    """The set this pass stands on (complete or not) and what happened to the ConfigMap."""

    result: Publication
    referenced: ReferencedSet | IncompleteSet

    @property
    def reclaimable(self) -> ReferencedSet | IncompleteSet:
        """What reclamation may use: the set, unless the write lost a race (then an incomplete one)."""
        if self.result is Publication.CONFLICT:
            return IncompleteSet(self.referenced.computed_at, ("the referenced set ConfigMap changed under us",))
        return self.referenced


class ReferencedSetPublisher:
    def __init__(
        self, view: View, kube: Kube, config: ReferencedSetConfig, metrics: SidecarMetrics | None = None
    ) -> None:
        self.view = view
        self.kube = kube
        self.config = config
        self.metrics = metrics or SidecarMetrics()
        self.fresh = FreshSet(kube, view)
        """Shared with reclamation, which recomputes the set after listing a registry."""

    async def publish(self, now: datetime) -> PublishResult:
        """Compute the set as of ``now`` and publish it if it is complete and new."""
        started = time.monotonic()
        try:
            return await asyncio.to_thread(self._publish, now)
        finally:
            self.metrics.passes.labels("referenced-set").inc()
            self.metrics.pass_duration.labels("referenced-set").observe(time.monotonic() - started)
            self.metrics.last_pass.labels("referenced-set").set(now.timestamp())

    def _publish(self, now: datetime) -> PublishResult:
        current = self._read()
        last = _published(current)
        computed = self.fresh.compute((last.generation if last else 0) + 1, now)
        if isinstance(computed, IncompleteSet):
            log.warning("referenced set incomplete, nothing published", extra={"fields": {"why": computed.summary()}})
            return self._done(Publication.INCOMPLETE, computed)
        if last is not None and computed.same_content(last):
            # what stands is the published generation; N+1 exists nowhere but in this process
            return self._done(Publication.UNCHANGED, replace(computed, generation=last.generation))
        try:
            self._write(current, computed)
        except Conflict:
            log.warning("referenced set ConfigMap changed concurrently; retrying next pass")
            return self._done(Publication.CONFLICT, computed)
        self.metrics.generation.set(computed.generation)
        log.info("referenced set published", extra={"fields": {"generation": computed.generation}})
        return self._done(Publication.PUBLISHED, computed)

    def _done(self, result: Publication, referenced: ReferencedSet | IncompleteSet) -> PublishResult:
        self.metrics.publications.labels(str(result)).inc()
        return PublishResult(result, referenced)

    def _read(self) -> Obj | None:
        try:
            return self.kube.get(CONFIG_MAP, self.config.configMap, self.config.namespace, timeout=TIMEOUT)
        except NotFound:
            return None

    def _write(self, current: Obj | None, referenced: ReferencedSet) -> None:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.config.configMap, "namespace": self.config.namespace, "labels": MANAGED_BY},
            "data": {CONFIGMAP_KEY: referenced.dumps()},
        }
        if current is None:
            self.kube.create(CONFIG_MAP, body, timeout=TIMEOUT)
            return
        meta = current.get("metadata") or {}
        body["metadata"] = {**meta, "labels": {**(meta.get("labels") or {}), **MANAGED_BY}}
        self.kube.replace(CONFIG_MAP, body, timeout=TIMEOUT)


def _published(configmap: Obj | None) -> ReferencedSet | None:
    """The set in the ConfigMap, or None when there is none or it is unreadable (then it is replaced)."""
    text = ((configmap or {}).get("data") or {}).get(CONFIGMAP_KEY)
    if not text:
        return None
    try:
        return ReferencedSet.loads(text)
    except (ValueError, TypeError, AttributeError) as exc:
        log.warning("published referenced set unreadable; it will be replaced", extra={"fields": {"error": str(exc)}})
        return None
