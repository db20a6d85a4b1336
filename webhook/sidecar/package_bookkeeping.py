"""Package bookkeeping pass: apply ``policies.package_bookkeeping.plan`` as the warden.

The decisions are pure (``policies/package_bookkeeping.py``); this module only writes them, each
write conditional on the resourceVersion it was computed from, so a decision taken from a stale
read is refused (409) and taken again from fresh state on the next pass, never forced:

1. plan from the informer cache (an unsynced cache plans nothing: a revision not yet listed
   could hold the highest number);
2. per package, first every status write (``status.revision``, ``publishedBy``/``publishedAt``)
   through the status subresource: the number and the record land before anything else;
3. then the metadata writes (latest-revision label, dropping the publish-record annotations),
   each carrying the resourceVersion the status write returned (or the one read). If any status
   write of the package failed, its metadata writes wait for the next pass: the labels were
   computed with the numbers being assigned, and a record must never be dropped before it is in
   status;
4. the deletion finalizer through ``Writer.remove_finalizer``.

The webhook admits these writes as any other: as the warden, the latest-revision label and the
publish-record annotations are ours to change. One failed write is logged and counted; the pass
goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from prometheus_client import Counter

from policies.kinds import PACKAGE_REVISION, REPOSITORY
from policies.model import Obj
from policies.package_bookkeeping import LATEST_LABEL, PackageWrites, RevisionWrites, plan, releases_finalizer
from policies.packages import FINALIZER
from policies.view import View
from webhook.kube.cache import InformerCache
from webhook.kube.client import MERGE_PATCH, Conflict, NotFound
from webhook.kube.writes import FinalizerResult, Writer
from webhook.sidecar.metrics import SidecarMetrics

log = logging.getLogger("catalog_warden.sidecar.packages")

MayAct = Callable[[], bool]
REFUSED_UNSYNCED = "the cache has not synced: an unlisted revision could hold the highest number; nothing is written"
MSG_NOT_LEADING = "this replica no longer holds the Lease; nothing more is written"
MSG_NO_REPOSITORIES = "the package bookkeeping needs a cache that watches Repositories"


class Write(StrEnum):
    STATUS = "status"
    METADATA = "metadata"
    FINALIZER = "finalizer"


class Result(StrEnum):
    WRITTEN = "Written"
    CONFLICT = "Conflict"
    """The revision changed since it was read; decided again next pass."""
    GONE = "Gone"
    DEFERRED = "Deferred"
    """A metadata write held back because a status write of the same package failed."""
    FAILED = "Failed"
    ABSENT = "Absent"
    """The finalizer was no longer there (someone else released it)."""
    KEPT = "Kept"
    """A lost race changed the revision so that its finalizer must stay (re-judged on the fresh read)."""


FINALIZER_RESULTS: dict[FinalizerResult, Result] = {
    FinalizerResult.REMOVED: Result.WRITTEN,
    FinalizerResult.ABSENT: Result.ABSENT,
    FinalizerResult.GONE: Result.GONE,
    FinalizerResult.KEPT: Result.KEPT,
}


@dataclass
class BookkeepingReport:
    """What one pass did: ``(namespace/name, write)`` -> result."""

    now: datetime
    planned: tuple[PackageWrites, ...] = ()
    results: dict[tuple[str, Write], Result] = field(default_factory=dict)
    errors: dict[tuple[str, Write], str] = field(default_factory=dict)
    stopped: str = ""

    def of(self, result: Result) -> list[tuple[str, Write]]:
        return sorted(key for key, r in self.results.items() if r is result)


class PackageBookkeeper:
    """One pass at a time over the cache; see the module doc."""

    def __init__(
        self, view: View, writer: Writer, metrics: SidecarMetrics | None = None, may_act: MayAct = lambda: True
    ) -> None:
        if isinstance(view, InformerCache) and REPOSITORY not in view.kinds():
            # Without Repositories every Published revision would look orphaned: its finalizer would go.
            raise ValueError(MSG_NO_REPOSITORIES)
        self.view = view
        self.writer = writer
        self.metrics = metrics or SidecarMetrics()
        self.may_act = may_act
        self._writes = Counter(
            "catalog_warden_package_bookkeeping_writes",
            "PackageRevision bookkeeping writes by write (status, metadata, finalizer) and result.",
            ["write", "result"],
            registry=self.metrics.registry,
        )

    async def run_once(self, now: datetime) -> BookkeepingReport:
        started = time.monotonic()
        report = BookkeepingReport(now)
        if not self.view.synced:
            report.stopped = REFUSED_UNSYNCED
            log.warning("package bookkeeping refused", extra={"fields": {"why": REFUSED_UNSYNCED}})
            return report
        report.planned = await asyncio.to_thread(plan, self.view, now)
        for package in report.planned:
            if not self.may_act():
                report.stopped = MSG_NOT_LEADING
                log.warning("package bookkeeping stopped", extra={"fields": {"why": MSG_NOT_LEADING}})
                break
            await asyncio.to_thread(self._package, package, report)
        for (_, write), result in report.results.items():
            self._writes.labels(str(write), str(result)).inc()
        self.metrics.passes.labels("packages").inc()
        self.metrics.pass_duration.labels("packages").observe(time.monotonic() - started)
        self.metrics.last_pass.labels("packages").set(now.timestamp())
        return report

    # ---- one package (in a worker thread: the client is blocking) ------------------------------

    def _package(self, package: PackageWrites, report: BookkeepingReport) -> None:
        current: dict[str, Obj] = {}
        status_failed = False
        for writes in package.revisions:
            current[writes.key] = writes.obj
            if writes.status is not None:
                written = self._attempt(report, writes.key, Write.STATUS, self._status, writes)
                if written is None:
                    status_failed = True
                else:
                    current[writes.key] = written
        # Labels turn "false" before any turns "true", and a "true" waits when a "false" failed,
        # so no moment has two latest revisions (at worst none, until the next pass).
        demoted_ok = True
        for writes in sorted(package.revisions, key=_promotes):
            if writes.metadata is not None:
                if status_failed or (_promotes(writes) and not demoted_ok):
                    report.results[(writes.key, Write.METADATA)] = Result.DEFERRED
                    continue
                landed = self._attempt(report, writes.key, Write.METADATA, self._metadata, writes, current[writes.key])
                if landed is None and _demotes(writes):
                    demoted_ok = False
        for writes in package.revisions:
            if writes.release_finalizer:
                self._attempt(report, writes.key, Write.FINALIZER, self._finalizer, writes, report.now)

    def _attempt(
        self, report: BookkeepingReport, key: str, write: Write, fn: Callable[..., Obj | Result], *args: object
    ) -> Obj | None:
        """Run one write; record its result. Returns the written object, None when it did not land."""
        try:
            written = fn(*args)
        except Conflict:
            report.results[(key, write)] = Result.CONFLICT
            log.info("package bookkeeping: changed since read", extra={"fields": {"revision": key, "write": write}})
            return None
        except NotFound:
            report.results[(key, write)] = Result.GONE
            return None
        except Exception as exc:  # one refused write never ends the pass
            report.results[(key, write)] = Result.FAILED
            report.errors[(key, write)] = f"{type(exc).__name__}: {exc}"
            log.warning("package bookkeeping write failed", extra={"fields": {"revision": key, "error": str(exc)}})
            return None
        if isinstance(written, Result):
            report.results[(key, write)] = written
            return None
        report.results[(key, write)] = Result.WRITTEN
        return written

    def _status(self, writes: RevisionWrites) -> Obj:
        assert writes.status is not None
        return self.writer.patch_status(PACKAGE_REVISION, writes.obj, writes.status) or writes.obj

    def _metadata(self, writes: RevisionWrites, current: Obj) -> Obj:
        meta = current["metadata"]
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"], **dict(writes.metadata or {})}}
        return self.writer.kube.patch(
            PACKAGE_REVISION,
            str(meta["name"]),
            str(meta.get("namespace", "")),
            patch,
            MERGE_PATCH,
            timeout=self.writer.timeout,
        )

    def _finalizer(self, writes: RevisionWrites, now: datetime) -> Obj | Result:
        def still_allowed(fresh: Obj) -> bool:
            return releases_finalizer(fresh, self.view, now)

        return FINALIZER_RESULTS[self.writer.remove_finalizer(PACKAGE_REVISION, writes.obj, FINALIZER, still_allowed)]


def _latest_written(writes: RevisionWrites) -> str | None:
    labels = (writes.metadata or {}).get("labels") or {}
    return labels.get(LATEST_LABEL)


def _promotes(writes: RevisionWrites) -> bool:
    """True when the write sets the latest-revision label to "true"."""
    return _latest_written(writes) == "true"


def _demotes(writes: RevisionWrites) -> bool:
    """True when the write sets the latest-revision label to "false"."""
    return _latest_written(writes) == "false"
