"""Reclamation: remove from opted-in registries what the referenced set does not keep.

Per Registry object annotated ``catalog-warden.io/reclaim`` (``distribution-delete`` or
``zot-untag``; anything else is off), one pass:

1. refuses at once when the set is incomplete (no registry request at all);
2. lists the registry: catalog, then for each managed ``component-descriptors/`` repository its
   tags, then one HEAD per tag for its digest. A failed catalog or tag listing makes the
   listing *partial*, and a partial listing reclaims nothing in that registry (a repository we
   could not list might be the only one that would have shown a tag as shared). A failed HEAD
   leaves that tag's digest unknown, which the plan treats conservatively;
3. recomputes the set from a fresh list of ComponentVersions (:class:`FreshSet`, the apiserver,
   not the cache) and plans against the union of both, so an entry created while the registry
   was listed, or while the cache's watch was down, keeps its artifact; a failed fresh list
   refuses;
4. plans with ``policies.reclaim.plan``, passes the plan through the circuit breaker
   (``policies.reclaim.breaker``: a held plan removes nothing, emits one Warning Event per
   distinct plan with the fingerprint an operator confirms it with, and counts a refusal), and
   executes the actions in order: delete by digest or untag; in dry-run nothing is removed. A
   failed action is counted and the rest go on.

Ages: registry APIs carry no push time, so a tag's age is the time this process first listed it
at that digest (kept in memory; a restart makes everything young again, which only delays).
One Event per registry and pass that planned removals reports what was (or would be) removed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from policies.artifacts import is_managed_repository, registry_key
from policies.kinds import REGISTRY
from policies.model import Obj
from policies.objects import dig, ref_of
from policies.reclaim import (
    Action,
    ActionKind,
    Approval,
    ReclaimMode,
    ReclaimPlan,
    TagInfo,
    breaker,
    confirmation_of,
    plan,
    reclaim_mode_of,
)
from policies.referenced_set import IncompleteSet, ReferencedSet
from policies.sidecar_config import ReclaimConfig
from policies.view import View
from webhook.registry.client import RegistryClient
from webhook.registry.errors import RegistryError
from webhook.sidecar.clients import RegistryClients, registry_hostname
from webhook.sidecar.metrics import SidecarMetrics
from webhook.sidecar.referenced_set import FreshSet

log = logging.getLogger("catalog_warden.sidecar.reclaim")

LOOKUP_CONCURRENCY = 8
"""Tag lookups in flight while listing, as the availability loop's default."""

EVENT_REASON = "ArtifactsReclaimed"
EVENT_REASON_DRY_RUN = "ArtifactsReclaimDryRun"
EVENT_REASON_HELD = "ReclaimHeld"
"""A Warning on the Registry: the circuit breaker held a plan; the message carries its fingerprint."""
MSG_EVENT = "{verb} {count} artifact(s) not in referenced set generation {generation}: {what}"
MSG_VERB_HELD = "would remove, once plan {fingerprint} is confirmed,"
MSG_PARTIAL = "listing of {registry} incomplete ({why}); nothing is reclaimed"
MSG_FAILED = "reclamation of {registry} failed ({error}); nothing more is removed there this pass"
MSG_NOT_LEADING = "this replica no longer holds the Lease; nothing more is removed"
MSG_NOT_LIVE = "the cluster cache is no longer live (a watch is down); nothing more is removed"

EventSink = Callable[[Obj, str, str, str], object]
"""``(involved object, reason, message, type)``: emits an Event (``Writer.emit_event``); blocking."""


class RefusalWhy(StrEnum):
    """Why a registry's pass reclaimed nothing on purpose: the closed set of the refusal metric's ``why``."""

    INCOMPLETE = "incomplete"
    PARTIAL = "partial"
    REFUSED = "refused"
    """``policies.reclaim.plan`` refused (an incomplete recomputation, a set naming nothing here)."""
    UNRESOLVED = "unresolved"
    SHARE = "share"
    """The two circuit-breaker reasons (``policies.reclaim.TripReason``)."""
    ERROR = "error"
    NOT_LEADING = "not-leading"


MayAct = Callable[[], bool]
"""Asked before each removal: whether this process may still act (the runner's "holding the Lease")."""


@dataclass
class RegistryReport:
    """One registry's pass: the plan (or why there was none) and what was executed."""

    registry: str
    mode: ReclaimMode
    plan: ReclaimPlan | None = None
    refused: str = ""
    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    requests: int = 0


class _Partial(Exception):
    """The listing could not be completed."""


class Reclaimer:
    def __init__(
        self,
        view: View,
        clients: RegistryClients,
        config: ReclaimConfig,
        emit_event: EventSink | None = None,
        metrics: SidecarMetrics | None = None,
        may_act: MayAct = lambda: True,
        *,
        fresh: FreshSet,
    ) -> None:
        self.view = view
        self.fresh = fresh
        """The set is recomputed from the apiserver after each listing, never from ``view``."""
        self.may_act = may_act
        """Losing the Lease cancels the pass a few event-loop turns later; this stops removals at once."""
        self.clients = clients
        self.config = config
        self.emit_event = emit_event
        self.metrics = metrics or SidecarMetrics()
        self._first_seen: dict[tuple[str, str, str, str], datetime] = {}
        self._lookups = asyncio.Semaphore(LOOKUP_CONCURRENCY)
        self._approved: dict[str, Approval] = {}
        """Per registry key: the confirmed plan this process is working through (lost on restart: refused again)."""
        self._announced: dict[str, str] = {}
        """Per registry key: the fingerprint of the last held plan an Event was emitted for."""

    def registries(self) -> list[tuple[Obj, ReclaimMode]]:
        """Registry objects that opted in, in ``namespace/name`` order, one per hostname."""
        found: dict[str, tuple[Obj, ReclaimMode]] = {}
        for registry in sorted(self.view.list(REGISTRY), key=ref_of):
            mode = reclaim_mode_of(registry)
            host = registry_hostname(registry)
            if mode is not None and host and host not in found:
                found[host] = (registry, mode)
        return list(found.values())

    async def run_once(self, referenced: ReferencedSet | IncompleteSet, now: datetime) -> list[RegistryReport]:
        started = time.monotonic()
        reports = [await self._isolated(obj, mode, referenced, now) for obj, mode in self.registries()]
        self.metrics.passes.labels("reclaim").inc()
        self.metrics.pass_duration.labels("reclaim").observe(time.monotonic() - started)
        self.metrics.last_pass.labels("reclaim").set(now.timestamp())
        return reports

    async def _isolated(
        self, registry: Obj, mode: ReclaimMode, referenced: ReferencedSet | IncompleteSet, now: datetime
    ) -> RegistryReport:
        """One registry's pass; an unexpected error ends that registry's pass only, never the others'."""
        try:
            return await self._registry(registry, mode, referenced, now)
        except Exception as exc:
            host = str(dig(registry, "spec", "hostname", default="")).strip().rstrip("/")
            error = f"{type(exc).__name__}: {exc}"
            report = RegistryReport(host, mode)
            return self._refused(report, MSG_FAILED.format(registry=host, error=error), RefusalWhy.ERROR)

    async def _registry(
        self, registry: Obj, mode: ReclaimMode, referenced: ReferencedSet | IncompleteSet, now: datetime
    ) -> RegistryReport:
        host = str(dig(registry, "spec", "hostname", default="")).strip().rstrip("/")
        report = RegistryReport(host, mode)
        if not self.may_act():
            return self._refused(report, MSG_NOT_LEADING, RefusalWhy.NOT_LEADING)
        if isinstance(referenced, IncompleteSet):
            # plan() refuses too; asking first would cost a full listing for nothing
            report.plan = plan(referenced, host, {}, mode, self.config.safetyAge, self.config.perPassCap, now)
            return self._refused(report, report.plan.refused, RefusalWhy.INCOMPLETE)
        client = (await self.clients.for_registry(registry)).client  # its own Secret, never another tenant's
        try:
            listing = await self._list(client, host, now, report)
        except _Partial as exc:
            return self._refused(report, MSG_PARTIAL.format(registry=host, why=exc), RefusalWhy.PARTIAL)
        # The set was computed before the listing: entries created since must keep their artifacts
        # too, so it is read again, fresh from the apiserver (a stale cache would not show them).
        standing = referenced.merged_with(await asyncio.to_thread(self.fresh.compute, referenced.generation, now))
        plain_http = bool(dig(registry, "spec", "plainHTTP", default=False))
        cfg = self.config
        proposed = plan(standing, host, listing, mode, cfg.safetyAge, cfg.perPassCap, now, plain_http)
        if proposed.refused:
            report.plan = proposed
            return self._refused(report, proposed.refused, RefusalWhy.REFUSED)
        key = registry_key(host, plain_http)
        confirmed = confirmation_of(registry)
        report.plan = breaker(
            proposed, standing, listing, cfg.maxRemovalShare, confirmed, self._approved.get(key), plain_http
        )
        if report.plan.refused:
            await self._held(registry, key, report)
            if cfg.dryRun:  # nothing is removed anyway: show what the held plan holds, for the operator to judge
                await self._execute(client, report, proposed.actions)
                await self._report_event(registry, report, referenced.generation, held=report.plan.fingerprint)
            return report
        self._announced.pop(key, None)
        self._remember(key, report.plan, confirmed)
        await self._execute(client, report, report.plan.actions)
        await self._report_event(registry, report, referenced.generation)
        return report

    def _refused(self, report: RegistryReport, why: str, label: RefusalWhy) -> RegistryReport:
        report.refused = why
        self.metrics.reclaim_refusals.labels(report.registry, str(label)).inc()
        log.warning("reclamation refused", extra={"fields": {"registry": report.registry, "why": why}})
        return report

    async def _held(self, registry: Obj, key: str, report: RegistryReport) -> None:
        """The breaker held the plan: count it every pass, tell the operator once per distinct plan."""
        assert report.plan is not None
        held = report.plan
        self._refused(report, held.refused, RefusalWhy(str(held.trips[0].reason)))
        self._approved.pop(key, None)
        if self._announced.get(key) == held.fingerprint:
            return
        if await self._emit(registry, EVENT_REASON_HELD, held.refused, "Warning"):
            self._announced[key] = held.fingerprint

    def _remember(self, key: str, passed: ReclaimPlan, confirmed: str) -> None:
        """Keep a confirmed plan's approval while its capped remainder is worked through, and no longer."""
        if not passed.trips or not passed.deferred:
            self._approved.pop(key, None)
        elif confirmed == passed.fingerprint:
            self._approved[key] = passed.approval()
        if passed.confirmed:
            log.warning(
                "reclamation plan confirmed by an operator",
                extra={"fields": {"registry": passed.registry, "fingerprint": passed.fingerprint}},
            )

    async def _list(
        self, client: RegistryClient, host: str, now: datetime, report: RegistryReport
    ) -> dict[str, list[TagInfo]]:
        try:
            report.requests += 1
            repositories = [r for r in await client.catalog() if is_managed_repository(r)]
            listing: dict[str, list[TagInfo]] = {}
            for repository in repositories:
                report.requests += 1
                tags = await client.tags(repository)
                listing[repository] = list(
                    await asyncio.gather(*(self._tag(client, host, repository, t, now, report) for t in tags))
                )
        except RegistryError as exc:
            raise _Partial(str(exc)) from exc
        return listing

    async def _tag(
        self, client: RegistryClient, host: str, repository: str, tag: str, now: datetime, report: RegistryReport
    ) -> TagInfo:
        report.requests += 1
        try:
            async with self._lookups:
                digest: str | None = (await client.head_manifest(repository, tag)).digest
        except RegistryError as exc:
            log.info("tag lookup failed", extra={"fields": {"repository": repository, "tag": tag, "error": str(exc)}})
            return TagInfo(tag, None)
        seen = self._first_seen.setdefault((host.lower(), repository, tag, digest), now)
        return TagInfo(tag, digest, seen)

    async def _execute(self, client: RegistryClient, report: RegistryReport, actions: Sequence[Action]) -> None:
        assert report.plan is not None
        mode = str(report.mode)
        for action in actions:
            what = (
                f"{action.repository}@{action.reference}"
                if action.kind is ActionKind.DELETE_DIGEST
                else (f"{action.repository}:{action.reference}")
            )
            if self.config.dryRun:
                report.removed.append(what)
                self.metrics.reclaim_actions.labels(report.registry, mode, "dry_run").inc()
                continue
            why = MSG_NOT_LEADING if not self.may_act() else MSG_NOT_LIVE if not self.view.synced else ""
            if why:
                report.refused = why
                log.warning("reclamation stopped", extra={"fields": {"registry": report.registry, "why": why}})
                break
            try:
                report.requests += 1
                if action.kind is ActionKind.DELETE_DIGEST:
                    await client.delete_manifest(action.repository, action.reference)
                else:
                    await client.delete_tag(action.repository, action.reference)
            except RegistryError as exc:
                report.failed.append(what)
                self.metrics.reclaim_actions.labels(report.registry, mode, "failed").inc()
                log.warning("reclamation action failed", extra={"fields": {"action": what, "error": str(exc)}})
                continue
            report.removed.append(what)
            self.metrics.reclaim_actions.labels(report.registry, mode, "removed").inc()
        log.info(
            "reclamation pass",
            extra={
                "fields": {
                    "registry": report.registry,
                    "removed": len(report.removed),
                    "failed": len(report.failed),
                    "deferred": report.plan.deferred,
                    "dryRun": self.config.dryRun,
                }
            },
        )

    async def _report_event(self, registry: Obj, report: RegistryReport, generation: int, held: str = "") -> None:
        """The removals (or, in dry-run, what would go; ``held``: the fingerprint of a plan the breaker holds)."""
        if not report.removed:
            return
        dry = self.config.dryRun
        message = MSG_EVENT.format(
            verb=MSG_VERB_HELD.format(fingerprint=held) if held else "would remove" if dry else "removed",
            count=len(report.removed),
            generation=generation,
            what=", ".join(report.removed),
        )
        await self._emit(registry, EVENT_REASON_DRY_RUN if dry else EVENT_REASON, message, "Normal")

    async def _emit(self, registry: Obj, reason: str, message: str, type: str) -> bool:
        """Emit one Event; whether it was (a failure is logged: an Event never fails the pass)."""
        if self.emit_event is None:
            return False
        try:
            await asyncio.to_thread(self.emit_event, registry, reason, message, type)
        except Exception as exc:
            log.warning("event not emitted", extra={"fields": {"error": str(exc)}})
            return False
        return True
