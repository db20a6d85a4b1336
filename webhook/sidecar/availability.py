"""The availability loop: one manifest lookup per ComponentVersion and pass, a status write only on change.

Each pass lists ComponentVersions from the informer cache, resolves each one's artifact
(``policies.artifacts``), sends one HEAD (by digest when the label holds a full digest, else by
tag) with at most ``availability.concurrency`` in flight, through the client for the entry's
namespace and host (``RegistryClients.for_namespace``: its own Registry's credentials, a granted
one's, or none; the status records which, ``status.availability.credentials``), and lets
``policies.availability.decide`` say what the status should be. Only a ``status_changed`` verdict
is written, so a steady catalog costs no API writes.

A registry that cannot be reached (connection failure or timeout) makes the rest of the pass
for that registry a *partial scan*: entries not yet looked up get ``PARTIAL_SCAN`` (Unknown)
without a request, instead of one timeout each. Nothing but a 404 ever moves an entry toward red.

``run_once(now)`` is one pass; the caller owns the clock and the schedule (``runner``), so tests
drive passes with injected times. Registry events feed :meth:`AvailabilityLoop.request_recheck`;
the runner then calls ``run_once(now, only=keys)`` early.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from policies.artifacts import ArtifactRef, Unresolved, artifact_of
from policies.availability import AVAILABLE, Check, Outcome, decide, status_changed
from policies.kinds import COMPONENT_VERSION
from policies.model import Obj
from policies.objects import condition, namespace_of, ref_of
from policies.sidecar_config import AvailabilityConfig
from policies.view import View
from webhook.kube.client import Conflict, NotFound
from webhook.kube.writes import Writer
from webhook.registry.errors import NotFound as ManifestNotFound
from webhook.registry.errors import RegistryError
from webhook.sidecar.clients import RegistryClients
from webhook.sidecar.metrics import SidecarMetrics
from webhook.sidecar.outcomes import detail_of, outcome_of

log = logging.getLogger("catalog_warden.sidecar.availability")

UNREACHABLE = frozenset({Outcome.TRANSPORT_ERROR, Outcome.TIMEOUT})
"""Outcomes after which the rest of the pass does not ask that registry again."""


@dataclass
class PassReport:
    """What one pass did, for logs, metrics and tests."""

    now: datetime
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    """ComponentVersion ``ns/name`` -> the outcome of its check."""
    requests: int = 0
    """Manifest lookups sent."""
    written: dict[str, str] = field(default_factory=dict)
    """ComponentVersion ``ns/name`` -> resourceVersion after our status write."""
    conflicts: list[str] = field(default_factory=list)
    """Entries whose write met a changed object (decided again next pass)."""
    errors: dict[str, str] = field(default_factory=dict)
    """ComponentVersion ``ns/name`` -> what went wrong unexpectedly; its status was left as it was."""


def _for_decision(cv: Obj) -> Obj:
    """``cv`` without ``metadata.generation``, so the condition carries no ``observedGeneration``.

    Without a status subresource every status write of a custom resource bumps its generation;
    an ``observedGeneration`` would then differ after each write and every pass would write again.
    """
    meta = {k: v for k, v in (cv.get("metadata") or {}).items() if k != "generation"}
    return {**cv, "metadata": meta}


class AvailabilityLoop:
    """One pass at a time over the cache; see the module doc."""

    def __init__(
        self,
        view: View,
        writer: Writer,
        clients: RegistryClients,
        config: AvailabilityConfig,
        metrics: SidecarMetrics | None = None,
    ) -> None:
        self.view = view
        self.writer = writer
        self.clients = clients
        self.config = config
        self.thresholds = config.thresholds()
        self.metrics = metrics or SidecarMetrics()
        self._rechecks: set[str] = set()
        self.recheck_wanted = asyncio.Event()
        """Set when an early re-check is queued; the runner waits on it between passes."""

    # ---- the early re-check queue -------------------------------------------------------------

    def request_recheck(self, keys: Iterable[str]) -> None:
        """Queue ComponentVersions (``ns/name``) for an early check; never anything else."""
        added = set(keys)
        if added:
            self._rechecks |= added
            self.recheck_wanted.set()

    def take_rechecks(self) -> set[str]:
        keys, self._rechecks = self._rechecks, set()
        self.recheck_wanted.clear()
        return keys

    # ---- one pass -----------------------------------------------------------------------------

    async def run_once(self, now: datetime, only: Collection[str] | None = None) -> PassReport:
        """Check every ComponentVersion (or only the ``ns/name`` keys given) once, as of ``now``."""
        started = time.monotonic()
        loop = "availability" if only is None else "availability-recheck"
        report = PassReport(now)
        self.clients.begin_pass()
        versions = sorted(self.view.list(COMPONENT_VERSION), key=ref_of)
        if only is not None:
            versions = [cv for cv in versions if ref_of(cv) in only]
            self.metrics.rechecks.inc(len(versions))
        unreachable: set[str] = set()
        limit = asyncio.Semaphore(self.config.concurrency)
        await asyncio.gather(*(self._one(cv, now, limit, unreachable, report) for cv in versions))
        for outcome in report.outcomes.values():
            self.metrics.checks.labels(str(outcome)).inc()
        if only is None:
            self._count_entries()
        self.metrics.passes.labels(loop).inc()
        self.metrics.pass_duration.labels(loop).observe(time.monotonic() - started)
        self.metrics.last_pass.labels(loop).set(now.timestamp())
        log.info(
            "availability pass",
            extra={"fields": {"entries": len(versions), "requests": report.requests, "writes": len(report.written)}},
        )
        return report

    async def _one(
        self, cv: Obj, now: datetime, limit: asyncio.Semaphore, unreachable: set[str], report: PassReport
    ) -> None:
        """Check and write one entry; whatever goes wrong stays with this entry.

        An unexpected error (an apiserver refusing the write, a Secret that cannot be read, an
        object the decision cannot parse) leaves this entry's status as it was, never False, and
        the pass goes on: one bad entry or registry must not stop the others, nor the referenced
        set and reclamation that follow the pass.
        """
        key = ref_of(cv)
        try:
            await self._check_and_write(cv, key, now, limit, unreachable, report)
        except Exception as exc:
            report.errors[key] = f"{type(exc).__name__}: {exc}"
            self.metrics.status_writes.labels("error").inc()
            log.warning("availability check failed", extra={"fields": {"entry": key, "error": report.errors[key]}})

    async def _check_and_write(
        self, cv: Obj, key: str, now: datetime, limit: asyncio.Semaphore, unreachable: set[str], report: PassReport
    ) -> None:
        ref = artifact_of(cv, self.view)
        async with limit:
            check = await self._check(namespace_of(cv), ref, unreachable, report)
        report.outcomes[key] = check.outcome
        desired = decide(_for_decision(cv), check, now, self.thresholds).apply(cv.get("status"))
        if not status_changed(cv.get("status"), desired):
            return
        try:
            written = await asyncio.to_thread(self.writer.patch_status, COMPONENT_VERSION, cv, desired)
        except Conflict:
            report.conflicts.append(key)
            self.metrics.status_writes.labels("conflict").inc()
            return
        except NotFound:
            self.metrics.status_writes.labels("gone").inc()
            return
        if written is not None:
            report.written[key] = str((written.get("metadata") or {}).get("resourceVersion", ""))
            self.metrics.status_writes.labels("written").inc()

    async def _check(
        self, namespace: str, ref: ArtifactRef | Unresolved, unreachable: set[str], report: PassReport
    ) -> Check:
        if isinstance(ref, Unresolved):
            return Check.unresolved(ref)
        host = ref.registry.lower()
        if host in unreachable:
            return Check.failed(ref, Outcome.PARTIAL_SCAN)
        pooled = await self.clients.for_namespace(namespace, ref.registry, ref.plain_http)
        try:
            report.requests += 1
            descriptor = await pooled.client.head_manifest(ref.repository, ref.reference)
        except ManifestNotFound:
            return Check.missing(ref, pooled.checked_with)
        except RegistryError as exc:
            outcome = outcome_of(exc)
            if outcome in UNREACHABLE:
                unreachable.add(host)
            log.info("manifest lookup failed", extra={"fields": {"artifact": str(ref), "error": str(exc)}})
            return Check.failed(ref, outcome, detail_of(exc), pooled.checked_with)
        return Check.found(ref, descriptor.digest, pooled.checked_with)

    def _count_entries(self) -> None:
        counts = Counter(
            str((condition(cv, AVAILABLE) or {}).get("status", "Unknown")) for cv in self.view.list(COMPONENT_VERSION)
        )
        for status in ("True", "False", "Unknown"):
            self.metrics.entries.labels(status).set(counts.get(status, 0))
