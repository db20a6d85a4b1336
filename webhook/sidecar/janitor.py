"""The retention janitor's sweep: plan from the cache, delete with preconditions, report.

The decision is ``policies.retention.plan`` (pure); this module only executes it:

1. at most one sweep per ``retention.interval`` (sweeps ride on the sidecar's passes);
2. plan from the informer cache (an unsynced cache plans nothing);
3. delete each planned entry with ``Writer.delete_if_unchanged``, which carries the uid and
   resourceVersion the plan evaluated. If the entry changed in between (a Release bound, the
   protection finalizer was added, the artifact returned and the entry turned green) the
   apiserver answers 409 and the entry is skipped until the next sweep, which sees its new state.
   Nothing is ever forced or retried within a sweep;
4. an Event on each deleted entry (and, in dry-run, on each entry that would be deleted) says why;
5. before each delete it asks whether this replica still holds the Lease, and whether the cache
   is still live (``view.synced``: false while a watch is down), and stops at once when not: a
   new leader may already be sweeping, and a stale cache may hide a Release bound since the plan.

A failed delete (the admission webhook refusing it, a transport error) is counted and logged, and
the sweep goes on with the next entry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import Counter, Gauge

from policies.kinds import COMPONENT_VERSION, RELEASE
from policies.retention import Deletion, KeepReason, RetentionPlan, plan
from policies.sidecar_config import RetentionConfig
from policies.view import View
from webhook.kube.cache import InformerCache
from webhook.kube.writes import DeleteResult, Writer
from webhook.sidecar.metrics import SidecarMetrics

log = logging.getLogger("catalog_warden.sidecar.janitor")

EVENT_REASON = "RetentionDeleted"
EVENT_REASON_DRY_RUN = "RetentionDryRun"
MSG_NOT_LEADING = "this replica no longer holds the Lease; nothing more is deleted"
MSG_NOT_LIVE = "the cluster cache is no longer live (a watch is down); nothing more is deleted"

MayAct = Callable[[], bool]
"""Asked before each delete: whether this process may still act (the runner's "holding the Lease")."""

DRY_RUN = "DryRun"
FAILED = "Failed"


@dataclass
class SweepReport:
    """What one sweep did, for logs, metrics and tests."""

    now: datetime
    plan: RetentionPlan | None = None
    results: dict[str, str] = field(default_factory=dict)
    """``namespace/name`` -> a ``DeleteResult`` value, ``DryRun`` or ``Failed``."""
    errors: dict[str, str] = field(default_factory=dict)
    """``namespace/name`` -> what went wrong unexpectedly (the entry stays)."""
    stopped: str = ""
    """Why the sweep stopped early or planned nothing (lost Lease, unsynced cache)."""

    def of(self, result: str) -> list[str]:
        return sorted(key for key, r in self.results.items() if r == result)


class _JanitorMetrics:
    """The janitor's own series, registered on the sidecar's registry."""

    def __init__(self, metrics: SidecarMetrics) -> None:
        r = metrics.registry
        self.deletions = Counter(
            "catalog_warden_retention_deletions",
            "Janitor deletes by result (Deleted, SkippedConflict: changed since the plan, Gone, DryRun, Failed).",
            ["result"],
            registry=r,
        )
        self.kept = Gauge(
            "catalog_warden_retention_kept_entries",
            "ComponentVersions the last sweep kept, by the first condition that kept them.",
            ["reason"],
            registry=r,
        )


class Janitor:
    """One sweep at a time over the cache; see the module doc."""

    def __init__(
        self,
        view: View,
        writer: Writer,
        config: RetentionConfig,
        metrics: SidecarMetrics | None = None,
        may_act: MayAct = lambda: True,
    ) -> None:
        if config.enabled and isinstance(view, InformerCache) and RELEASE not in view.kinds():
            # Without Releases every entry would look unreferenced: refuse rather than delete.
            raise ValueError("the retention janitor needs a cache that watches Releases")
        self.view = view
        self.writer = writer
        self.config = config
        self.metrics = metrics or SidecarMetrics()
        self._own = _JanitorMetrics(self.metrics)
        self.may_act = may_act
        self._last_sweep: datetime | None = None

    def due(self, now: datetime) -> bool:
        return self._last_sweep is None or now - self._last_sweep >= self.config.interval

    async def run_once(self, now: datetime, *, force: bool = False) -> SweepReport | None:
        """Sweep as of ``now`` if ``retention.interval`` has passed since the last sweep (or ``force``)."""
        if not (force or self.due(now)):
            return None
        self._last_sweep = now
        started = time.monotonic()
        report = SweepReport(now)
        report.plan = await asyncio.to_thread(plan, self.view, now, self.config)
        if report.plan.refused:
            report.stopped = report.plan.refused
            log.warning("retention sweep refused", extra={"fields": {"why": report.stopped}})
        for deletion in report.plan.deletions:
            why = self._must_stop()
            if why:
                report.stopped = why
                log.warning("retention sweep stopped", extra={"fields": {"why": why}})
                break
            await self._one(deletion, now, report)
        self._count(report)
        self.metrics.passes.labels("retention").inc()
        self.metrics.pass_duration.labels("retention").observe(time.monotonic() - started)
        self.metrics.last_pass.labels("retention").set(now.timestamp())
        log.info(
            "retention sweep",
            extra={
                "fields": {
                    "planned": len(report.plan.deletions),
                    "deleted": len(report.of(str(DeleteResult.DELETED))),
                    "skipped": len(report.of(str(DeleteResult.SKIPPED_CONFLICT))),
                    "dryRun": self.config.dryRun,
                }
            },
        )
        return report

    def _must_stop(self) -> str:
        """Why the sweep must stop before its next delete ("" to go on); asked again before each one."""
        if not self.view.synced:
            return MSG_NOT_LIVE
        if not self.config.dryRun and not self.may_act():
            return MSG_NOT_LEADING
        return ""

    async def _one(self, deletion: Deletion, now: datetime, report: SweepReport) -> None:
        if self.config.dryRun:
            report.results[deletion.key] = DRY_RUN
            await self._event(deletion, EVENT_REASON_DRY_RUN, deletion.message(now, self.config, dry_run=True))
            return
        try:
            result = await asyncio.to_thread(self.writer.delete_if_unchanged, COMPONENT_VERSION, deletion.obj)
        except Exception as exc:  # one refused delete (e.g. by the admission webhook) never ends the sweep
            report.results[deletion.key] = FAILED
            report.errors[deletion.key] = f"{type(exc).__name__}: {exc}"
            log.warning("retention delete failed", extra={"fields": {"entry": deletion.key, "error": str(exc)}})
            return
        report.results[deletion.key] = str(result)
        if result is DeleteResult.DELETED:
            await self._event(deletion, EVENT_REASON, deletion.message(now, self.config))
        elif result is DeleteResult.SKIPPED_CONFLICT:
            log.info("retention delete skipped: changed since evaluated", extra={"fields": {"entry": deletion.key}})

    async def _event(self, deletion: Deletion, reason: str, message: str) -> None:
        try:
            await asyncio.to_thread(self.writer.emit_event, deletion.obj, reason, message)
        except Exception as exc:  # an Event is a report, never a reason to fail the sweep
            log.warning("event not emitted", extra={"fields": {"entry": deletion.key, "error": str(exc)}})

    def _count(self, report: SweepReport) -> None:
        for result in report.results.values():
            self._own.deletions.labels(result).inc()
        if report.plan is not None and not report.plan.refused:
            counts = report.plan.kept_counts()
            for reason in KeepReason:
                self._own.kept.labels(str(reason)).set(counts.get(reason, 0))
