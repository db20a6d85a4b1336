"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Why not ``kubernetes.leaderelection``: it cannot be stopped from outside, runs the leader's work
in an unmanaged thread, and gives no way to bound a renewal that hangs, so a leader cut off from
the apiserver could keep its loops running after the lease expired for the others. This module is
the small equivalent of client-go's ``leaderelection`` package on the same Lease fields
(``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``, ``renewTime``,
``leaseTransitions``), so it interoperates with any client-go candidate on the same Lease.

The guarantees, and why they hold:

- At most one candidate wins a term: every write of the Lease is an update carrying the
  resourceVersion that was read (a create for a missing Lease), so of two concurrent writers one
  gets 409 and loses.
- A follower takes over only when the holder has not renewed for ``lease_duration`` *as the
  follower observed it*: expiry is measured on the follower's monotonic clock from the moment it
  first saw the current record, never from the record's timestamps, so clock skew cannot shorten it.
- A leader that cannot renew stops leading ``renew_deadline`` after the start of its last
  successful renewal: a watchdog fires ``on_stopped_leading`` at that moment even when the
  renewal request itself hangs. Since ``renew_deadline < lease_duration`` and every follower
  observed that renewal only after it was sent, the loops are stopped before any follower may
  acquire. ``on_stopped_leading`` must therefore return within ``lease_duration - renew_deadline``.
- A candidate that cannot campaign says so: an attempt that fails for another reason than losing
  a race (409) sets :attr:`LeaderElector.problem` (readiness reports it) and logs one warning per
  change of cause (a missing namespace, 403, an unreachable apiserver), not one per retry.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from policies.kinds import LEASE
from webhook.kube.client import ApiError, Conflict, Kube, NotFound

log = logging.getLogger("catalog_warden.leader")

MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
JITTER_FACTOR = 1.2

MSG_CANNOT_CAMPAIGN = "cannot {verb} the Lease {lease}: {error}"
"""The readiness reason while attempts fail; ``error`` is the apiserver's answer (or the transport error)."""
FIXES: Mapping[int, str] = {
    0: "the apiserver did not answer: check the network path to it",
    403: "grant get, create, update on leases (coordination.k8s.io) in {namespace}: manifests/deploy/rbac.yaml",
    404: "create namespace {namespace}, or run the sidecar in the Lease's namespace (--namespace, $POD_NAMESPACE)",
}
"""HTTP status of a failed attempt (0: no answer) -> the way out, logged with the warning."""


@dataclass(frozen=True)
class LeaseTiming:
    """client-go's defaults are 15 s / 10 s / 2 s; tests use a few seconds.

    ``lease_duration`` is whole seconds because the Lease stores it as an integer.
    """

    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than retry_period * {JITTER_FACTOR}")


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class _Term:
    """One period of leadership; its watchdog ends it at the renew deadline unless extended."""

    def __init__(self, deadline: float, clock: Callable[[], float], on_end: Callable[[str], None]) -> None:
        self._deadline = deadline
        self._clock = clock
        self._on_end = on_end
        self._cond = threading.Condition()
        self.active = True
        self._watchdog = threading.Thread(target=self._watch, name="leader-watchdog", daemon=True)
        self._watchdog.start()

    def extend(self, deadline: float) -> bool:
        """Move the deadline forward; False when the term already ended."""
        with self._cond:
            if not self.active:
                return False
            self._deadline = max(self._deadline, deadline)
            self._cond.notify_all()
            return True

    def end(self, reason: str) -> None:
        with self._cond:
            if not self.active:
                return
            self.active = False
            self._cond.notify_all()
        self._on_end(reason)

    def _watch(self) -> None:
        with self._cond:
            while self.active:
                remaining = self._deadline - self._clock()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            else:
                return
        self.end("renew deadline passed")


class LeaderElector:
    """Campaigns for one Lease and calls back when leadership starts and stops.

    ``run(stop)`` blocks: it campaigns, calls ``on_started_leading()`` on winning, renews every
    ``retry_period``, calls ``on_stopped_leading()`` when leadership ends (lost, or the renew
    deadline passed), and campaigns again. When ``stop`` is set it returns, releasing the Lease
    if it held it (``holderIdentity`` cleared) so a follower can take over at once. Callbacks run
    on elector threads and must return promptly.
    """

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        timing: LeaseTiming | None = None,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        on_new_leader: Callable[[str], None] = lambda _identity: None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime.datetime] = _utc_now,
    ) -> None:
        if not identity:
            raise ValueError("a leader election identity is required")
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing or LeaseTiming()
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.clock = clock
        self.wall_clock = wall_clock
        self.leading = threading.Event()
        """Set while this candidate leads; cleared (after ``on_stopped_leading``) when it stops."""
        self._observed: Mapping[str, Any] | None = None
        self._observed_rv = ""
        self._observed_at = 0.0
        self._last_holder = ""
        self._term: _Term | None = None
        self._term_lock = threading.Lock()
        self.problem = ""
        """Why the last attempt could not campaign (empty when it reached a decision: won, renewed,
        someone else holds the Lease, or lost a race)."""
        self._problem_cause: tuple[str, int, str] | None = None

    # ---- the loop ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        t = self.timing
        while not stop.is_set():
            started = self.clock()
            if self._try_acquire_or_renew(timeout=t.renew_deadline):
                self._lead(stop, started)
            if not stop.is_set():
                stop.wait(t.retry_period)
        self._release()

    def _lead(self, stop: threading.Event, renewed_at: float) -> None:
        t = self.timing
        term = _Term(renewed_at + t.renew_deadline, self.clock, self._stopped)
        with self._term_lock:
            self._term = term
        self.leading.set()
        log.info("started leading", extra={"fields": {"identity": self.identity, "lease": self.name}})
        self.on_started_leading()
        while term.active and not stop.wait(t.retry_period):
            started = self.clock()
            if self._try_acquire_or_renew(timeout=t.renew_deadline):
                term.extend(started + t.renew_deadline)
            elif self._observed is not None and self._holder(self._observed) not in ("", self.identity):
                term.end("lease taken by " + self._holder(self._observed))
        if stop.is_set():
            term.end("stopped")  # loops first, then the Lease: never two leaders working at once

    def _stopped(self, reason: str) -> None:
        log.info("stopped leading", extra={"fields": {"identity": self.identity, "reason": reason}})
        try:
            self.on_stopped_leading()
        finally:
            self.leading.clear()

    # ---- one attempt -------------------------------------------------------------------------

    @staticmethod
    def _holder(record: Mapping[str, Any]) -> str:
        return str((record.get("spec") or {}).get("holderIdentity") or "")

    def _observe(self, lease: Mapping[str, Any]) -> None:
        rv = str((lease.get("metadata") or {}).get("resourceVersion", ""))
        if rv != self._observed_rv:
            self._observed, self._observed_rv, self._observed_at = lease, rv, self.clock()
            holder = self._holder(lease)
            if holder and holder != self._last_holder:
                self._last_holder = holder
                log.info("new leader", extra={"fields": {"identity": self.identity, "leader": holder}})
                self.on_new_leader(holder)

    def _try_acquire_or_renew(self, timeout: float) -> bool:
        """One read-and-write attempt; True when this candidate holds the Lease afterwards."""
        now = self.wall_clock().astimezone(datetime.UTC).strftime(MICRO_TIME)
        duration = self.timing.lease_duration
        try:
            lease = self.kube.get(LEASE, self.name, self.namespace, timeout=timeout)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": duration,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                },
            }
            try:
                self._observe(self.kube.create(LEASE, body, timeout=timeout))
            except Conflict:  # AlreadyExists: another candidate created it first
                return self._campaigned(False)
            except ApiError as exc:
                return self._failed("create", exc)
            return self._campaigned(True)
        except ApiError as exc:
            return self._failed("get", exc)
        self._observe(lease)
        spec = dict(lease.get("spec") or {})
        holder = self._holder(lease)
        held_by_me = holder == self.identity
        observed_duration = int(spec.get("leaseDurationSeconds") or duration)
        if holder and not held_by_me and self.clock() < self._observed_at + observed_duration:
            return self._campaigned(False)  # someone else's lease, not yet expired as we observed it
        if held_by_me:
            spec["renewTime"] = now
        else:
            # client-go counts every change of holder, a takeover after a release included
            transitions = int(spec.get("leaseTransitions") or 0)
            spec.update(acquireTime=now, renewTime=now, leaseTransitions=transitions + 1)
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=duration)
        updated = {**lease, "spec": spec}
        try:
            self._observe(self.kube.replace(LEASE, updated, timeout=timeout))
        except Conflict:
            return self._campaigned(False)
        except ApiError as exc:
            return self._failed("update", exc)
        return self._campaigned(True)

    # ---- whether we can campaign -------------------------------------------------------------

    def _campaigned(self, won: bool) -> bool:
        """An attempt that reached a decision: whatever failed before is over."""
        if self._problem_cause is not None:
            log.info("lease reachable again", extra={"fields": {"identity": self.identity, "lease": self._lease}})
        self.problem, self._problem_cause = "", None
        return won

    def _failed(self, verb: str, exc: ApiError) -> bool:
        """An attempt that could not campaign: readiness says why; one warning per change of cause.

        The cause is the verb and the answer's status and reason, not its message: an unreachable
        apiserver words each failure differently, and a retry every ``retry_period`` must not log.
        """
        self.problem = MSG_CANNOT_CAMPAIGN.format(verb=verb, lease=self._lease, error=exc)
        cause = (verb, exc.status, exc.reason)
        if cause != self._problem_cause:
            self._problem_cause = cause
            fields = {"identity": self.identity, "lease": self._lease, "verb": verb, "error": str(exc)}
            if exc.status in FIXES:
                fields["fix"] = FIXES[exc.status].format(namespace=self.namespace)
            log.warning("cannot take or renew the lease", extra={"fields": fields})
        return False

    @property
    def _lease(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _release(self) -> None:
        """Clear ``holderIdentity`` if we still hold the Lease, so a follower need not wait it out."""
        lease = self._observed
        if lease is None or self._holder(lease) != self.identity:
            return
        now = self.wall_clock().astimezone(datetime.UTC).strftime(MICRO_TIME)
        spec = {**(lease.get("spec") or {}), "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": now}
        spec = {k: v for k, v in spec.items() if v is not None}
        try:
            self._observe(self.kube.replace(LEASE, {**lease, "spec": spec}, timeout=self.timing.retry_period))
        except ApiError as exc:  # 409: someone took it meanwhile; else it expires by itself
            log.info("lease release failed", extra={"fields": {"error": str(exc)}})
            return
        log.info("released the lease", extra={"fields": {"identity": self.identity, "lease": self._lease}})
