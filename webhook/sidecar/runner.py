"""The sidecar process: cache, registry clients, the loops under leader election, the events endpoint.

Only the Lease holder runs loops; every replica serves ``/events`` (a follower queues re-checks
that only run if it becomes leader, which is harmless: the periodic pass is the guarantee),
``/healthz`` and ``/metrics``. A pass is, in order and each switchable by config: availability,
referenced-set publication, reclamation (which needs the set just computed, so it runs only
with ``referencedSet.enabled`` and only on a complete set). Between passes the scheduler waits
``availability.interval`` or for an early re-check, whichever comes first.

Shutdown (SIGTERM, SIGINT or :meth:`Sidecar.stop`): the listener stops, the loops are cancelled
and the writes they had in flight finish (each is bounded by its request timeout), then the Lease
is released (so a follower takes over at once), then the cache and the clients close and the
process exits 0: nothing this replica does lands after the release. Losing the Lease cancels the
loops at once; a write already sent may still complete.

Readiness (``/readyz``) is "able to campaign": the cache synced and live, and the last Lease
attempt reached a decision. A follower whose attempts see another replica's valid Lease is ready;
one whose attempts fail (missing namespace, 403, apiserver unreachable) is not, with the reason.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from policies.config import PolicyConfig
from policies.kinds import (
    COMPONENT,
    COMPONENT_VERSION,
    HELM_CLUSTER_ADDON,
    HELM_CLUSTER_ADDON_CHART,
    HELM_CLUSTER_ADDON_REPOSITORY,
    PACKAGE_REVISION,
    REFERENCE_GRANT,
    REGISTRY,
    RELEASE,
    REPOSITORY,
    SECRET,
)
from policies.model import Obj
from policies.view import not_synced_reason
from webhook.graceful import GracefulServer
from webhook.kube.cache import InformerCache
from webhook.kube.client import ApiError, Kube, NotFound
from webhook.kube.leader import LeaderElector, LeaseTiming
from webhook.kube.writes import Writer
from webhook.sidecar.availability import AvailabilityLoop
from webhook.sidecar.chart_index import ChartIndexer
from webhook.sidecar.clients import ClientFactory, RegistryClients, default_factory
from webhook.sidecar.events import TOKEN_ENV as EVENTS_TOKEN_ENV
from webhook.sidecar.events import events_app
from webhook.sidecar.janitor import Janitor
from webhook.sidecar.metrics import SidecarMetrics
from webhook.sidecar.package_bookkeeping import PackageBookkeeper
from webhook.sidecar.reclaim import Reclaimer
from webhook.sidecar.referenced_set import ReferencedSetPublisher

log = logging.getLogger("catalog_warden.sidecar")

LEASE_NAME = "catalog-warden-sidecar"
CACHED_KINDS = (
    COMPONENT,
    COMPONENT_VERSION,
    REGISTRY,
    REFERENCE_GRANT,
    RELEASE,
    HELM_CLUSTER_ADDON_REPOSITORY,
    HELM_CLUSTER_ADDON_CHART,
    HELM_CLUSTER_ADDON,
    PACKAGE_REVISION,
    REPOSITORY,
)
"""All the loops read: entries, where their artifacts live, which registries opted in and which
ReferenceGrants let a namespace use another's Registry credentials, and (for the
retention janitor) which Releases still reference an entry; the chart indexer: repositories, their chart
objects (the recorded verdicts) and the addons that keep removed versions; the package bookkeeping:
PackageRevisions and the Repositories that decide whether a Published revision may go."""
SECRET_TIMEOUT = 10.0
FORBIDDEN = 403
SECRETS_ROLE = "catalog-warden-registry-secrets"
SECRETS_COMPONENT = "manifests/components/registry-secrets"
"""The ClusterRole that grants Secret reads, bound per namespace (manifests/deploy/rbac.yaml)."""
SYNC_POLL = 0.1
EVENTS_DRAIN_SECONDS = 5
"""On shutdown, how long requests to the events port may take to finish (an event is one cache lookup)."""


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class SidecarSettings:
    namespace: str = "catalog-warden"
    """Where the Lease lives (the warden's namespace)."""
    identity: str = ""
    """This replica's name in the Lease (the pod name)."""
    events_host: str = "0.0.0.0"
    events_port: int = 8081
    lease_name: str = LEASE_NAME


class Sidecar:
    """Everything the ``sidecar`` command runs; tests build one with their own cache and clock."""

    def __init__(
        self,
        kube: Kube,
        config: PolicyConfig,
        settings: SidecarSettings,
        *,
        clock: Callable[[], datetime.datetime] = utc_now,
        cache: InformerCache | None = None,
        client_factory: ClientFactory = default_factory,
        lease_timing: LeaseTiming | None = None,
    ) -> None:
        self.kube = kube
        self.config = config.sidecar
        self.policy = config
        self.settings = settings
        self.clock = clock
        self.lease_timing = lease_timing
        self.metrics = SidecarMetrics()
        self.cache = cache or InformerCache.configured(kube, config.informer, CACHED_KINDS)
        self.writer = Writer(kube, instance=settings.identity, clock=clock)
        self.clients = RegistryClients(self.cache, self._read_secret, client_factory)
        self.availability = AvailabilityLoop(
            self.cache, self.writer, self.clients, self.config.availability, self.metrics
        )
        self.publisher = ReferencedSetPublisher(self.cache, kube, self.config.referencedSet, self.metrics)
        self.leading = asyncio.Event()
        self.janitor = Janitor(
            self.cache, self.writer, self.config.retention, self.metrics, may_act=self.leading.is_set
        )
        self.chart_index = ChartIndexer(
            self.cache, kube, self.writer, self.clients, self.config.chartIndex, namespace=settings.namespace
        )
        # Built only when switched on: it refuses a cache that cannot show it every Repository.
        self.packages = (
            PackageBookkeeper(self.cache, self.writer, self.metrics, may_act=self.leading.is_set)
            if config.runs_upstream_loop("packages")
            else None
        )
        self.reclaimer = Reclaimer(
            self.cache,
            self.clients,
            self.config.reclaim,
            self._emit_event,
            self.metrics,
            may_act=self.leading.is_set,
            fresh=self.publisher.fresh,
        )
        self.server = GracefulServer(
            uvicorn.Config(
                events_app(
                    self.cache,
                    self.availability.request_recheck,
                    self.metrics,
                    healthy=self.healthy,
                    token=os.environ.get(EVENTS_TOKEN_ENV, ""),
                    ready=self.ready,
                ),
                host=settings.events_host,
                port=settings.events_port,
                log_config=None,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=EVENTS_DRAIN_SECONDS,
            )
        )
        self._lost = asyncio.Event()
        self.elector: LeaderElector | None = None

    # ---- one pass (tests call this directly) --------------------------------------------------

    async def pass_once(self, now: datetime.datetime) -> None:
        """Availability, the retention janitor, the referenced set and reclamation, the chart index, then the
        package bookkeeping, as enabled.

        The janitor runs before the set is computed, so an entry it deleted is no longer kept. Nothing
        runs while the cache is not live (a watch down or silent beyond its bound): an entry created
        meanwhile would be invisible to every loop, so none may act on what it sees.
        """
        why = not_synced_reason(self.cache)
        if why:
            log.warning("sidecar pass skipped", extra={"fields": {"why": why}})
            return
        if self.config.availability.enabled:
            await self.availability.run_once(now)
        if self.config.retention.enabled:
            await self.janitor.run_once(now)
        if self.config.referencedSet.enabled:
            published = await self.publisher.publish(now)
            await self.reclaimer.run_once(published.reclaimable, now)
        if self.policy.runs_upstream_loop("charts") and self.chart_index.due(now):
            await self.chart_index.run_once(now)
        if self.packages is not None:
            await self.packages.run_once(now)

    async def schedule(self) -> None:
        """Run passes every interval, and early re-checks as they are queued, until cancelled."""
        interval = self.config.availability.interval.total_seconds()
        while True:
            try:
                await self.pass_once(self.clock())
            except Exception:  # the next pass starts from fresh state; a loop that dies reclaims nothing
                log.exception("sidecar pass failed")
                self.metrics.passes.labels("failed").inc()
            deadline = asyncio.get_running_loop().time() + interval
            while (remaining := deadline - asyncio.get_running_loop().time()) > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.availability.recheck_wanted.wait(), remaining)
                keys = self.availability.take_rechecks()
                if keys and self.config.availability.enabled and self.cache.synced:
                    try:
                        await self.availability.run_once(self.clock(), only=keys)
                    except Exception:
                        log.exception("early re-check failed")

    # ---- probes -------------------------------------------------------------------------------

    def healthy(self) -> tuple[bool, str]:
        """Liveness: an informer thread that ended is a bug no retry fixes (a stale cache is not: see ready)."""
        dead = self.cache.dead_threads()
        return (False, "informer threads ended: " + ", ".join(map(str, dead))) if dead else (True, "ok")

    def ready(self) -> tuple[bool, str]:
        """Whether this replica can lead: the cache synced and live, and the Lease reachable; else why not.

        Holding the Lease is not required: a healthy follower is ready to take over, and marking it
        unready would only hide the replica that is needed when the leader goes.
        """
        lease = self.elector.problem if self.elector is not None else ""
        why = "; ".join(filter(None, (not_synced_reason(self.cache), lease)))
        return (not why, why or "ok")

    # ---- the process --------------------------------------------------------------------------

    def stop(self) -> None:
        self.server.should_exit = True

    async def run(self) -> None:
        """Serve until :meth:`stop` or a signal; lead the loops while holding the Lease."""
        loop = asyncio.get_running_loop()
        # The loops' blocking calls (asyncio.to_thread) run here, so shutdown can wait for them.
        workers = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="sidecar-worker")
        loop.set_default_executor(workers)
        self.cache.start()
        self.elector = elector = LeaderElector(
            self.kube,
            self.settings.namespace,
            self.settings.lease_name,
            self.settings.identity,
            timing=self.lease_timing,
            on_started_leading=lambda: loop.call_soon_threadsafe(self._started_leading),
            on_stopped_leading=lambda: loop.call_soon_threadsafe(self._stopped_leading),
        )
        elector_stop = threading.Event()
        leader = asyncio.create_task(self._campaign(elector, elector_stop))
        log.info("sidecar serving", extra={"fields": {"events_port": self.settings.events_port}})
        try:
            await self.server.serve()
        finally:
            leader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await leader
            with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sidecar-stop") as stopping:
                # A cancelled task leaves its request running in a worker: let those finish (and
                # start no queued one) before the Lease goes, or a write could follow the release.
                await loop.run_in_executor(stopping, lambda: workers.shutdown(wait=True, cancel_futures=True))
                loop.set_default_executor(concurrent.futures.ThreadPoolExecutor())
                elector_stop.set()
                await loop.run_in_executor(stopping, self._join, elector_stop)
            self.cache.stop()
            await self.clients.aclose()
            log.info("sidecar stopped", extra={"fields": {"identity": self.settings.identity}})

    def _started_leading(self) -> None:
        self._lost.clear()
        self.leading.set()

    def _stopped_leading(self) -> None:
        self.leading.clear()
        self._lost.set()

    async def _campaign(self, elector: LeaderElector, elector_stop: threading.Event) -> None:
        self._elector_thread = threading.Thread(target=elector.run, args=(elector_stop,), name="sidecar-elector")
        self._elector_thread.start()
        while not self.cache.synced:
            await asyncio.sleep(SYNC_POLL)
        while True:
            await self.leading.wait()
            work = asyncio.create_task(self.schedule())
            lost = asyncio.create_task(self._lost.wait())
            try:
                await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (work, lost):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    def _join(self, _stop: threading.Event) -> None:
        thread = getattr(self, "_elector_thread", None)
        if thread is not None:
            thread.join(30)

    # ---- cluster reads and writes the loops need --------------------------------------------

    def _read_secret(self, namespace: str, name: str) -> Obj | None:
        """The Secret, or None when it is missing or RBAC refuses it (then the registry is asked anonymously).

        Secret reads are granted namespace by namespace (manifests/components/registry-secrets), so
        a 403 is a namespace nobody bound yet: it must cost that registry its credentials, not the
        whole check.
        """
        try:
            return self.kube.get(SECRET, name, namespace, timeout=SECRET_TIMEOUT)
        except NotFound:
            return None
        except ApiError as exc:
            if exc.status != FORBIDDEN:
                raise
            fix = (
                f"bind the ClusterRole {SECRETS_ROLE} in namespace {namespace} (manifests/components/registry-secrets)"
            )
            fields = {"secret": f"{namespace}/{name}", "error": str(exc), "fix": fix}
            log.warning("registry secret not readable", extra={"fields": fields})
            return None

    def _emit_event(self, involved: Obj, reason: str, message: str, type: str = "Normal") -> None:
        self.writer.emit_event(involved, reason, message, type)
