"""Two sidecars elect one leader through the real Lease; SIGTERM hands over well within its duration.

Both run as ``catalog-warden sidecar`` processes with the shipped config and timing (client-go's
15 s lease, 2 s retry) and the sidecar ServiceAccount's token. What happened is read from the
Lease's own fields, every version of it: a watch opened before the signal sees the released state
(``holderIdentity`` cleared, ``leaseDurationSeconds: 1``) even though the follower overwrites it
within one retry period.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from typing import Any

from tests.support.controlplane.cluster import NAMESPACE, SidecarProcess, wait_for
from webhook.kube.client import Kube
from webhook.kube.leader import MICRO_TIME, LeaseTiming
from webhook.sidecar.runner import LEASE_NAME

SHIPPED = LeaseTiming()
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"


def lease_time(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, MICRO_TIME).replace(tzinfo=datetime.UTC)


def holder(admin: Kube) -> str:
    return str(admin.request("GET", f"{LEASES}/{LEASE_NAME}").get("spec", {}).get("holderIdentity", ""))


class LeaseVersions:
    """Every version of the Lease from ``resourceVersion`` on, read by a watch in a thread."""

    def __init__(self, admin: Kube, resource_version: str) -> None:
        query = [
            ("watch", "true"),
            ("fieldSelector", f"metadata.name={LEASE_NAME}"),
            ("resourceVersion", resource_version),
        ]
        self.stream = admin.stream(LEASES, query, timeout=(5.0, 60.0))
        self.specs: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for event in self.stream:
            with self.lock:
                self.specs.append(dict(event["object"]["spec"]))

    def seen(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.specs)

    def close(self) -> None:
        self.stream.close()
        self.thread.join(10)


def test_two_sidecars_elect_one_leader_and_sigterm_hands_over_within_the_lease(
    admin: Kube, sidecar: Callable[..., SidecarProcess]
) -> None:
    a = sidecar("sidecar-a").start()
    wait_for(lambda: holder(admin) == a.name, f"{a.name} to hold the Lease")
    b = sidecar("sidecar-b").start()  # ready: it sees a valid Lease held by another and can campaign
    lease = admin.request("GET", f"{LEASES}/{LEASE_NAME}")
    assert lease["spec"]["holderIdentity"] == a.name, "the follower took the Lease from a live leader"
    assert lease["spec"]["leaseDurationSeconds"] == SHIPPED.lease_duration
    transitions = lease["spec"].get("leaseTransitions", 0)
    versions = LeaseVersions(admin, lease["metadata"]["resourceVersion"])
    try:
        signalled = datetime.datetime.now(datetime.UTC)
        a.stop()
        assert a.popen is not None and a.popen.returncode == 0, a.logs()
        wait_for(lambda: any(s.get("holderIdentity") == b.name for s in versions.seen()), f"{b.name} to take over")
    finally:
        versions.close()

    specs = versions.seen()
    released = next((i for i, spec in enumerate(specs) if "holderIdentity" not in spec), None)
    assert released is not None, f"{a.name} never released the Lease: {specs}"
    release, taken = specs[released], specs[released + 1]
    assert all(spec["holderIdentity"] == a.name for spec in specs[:released]), "a renewed until the release"
    assert release["leaseDurationSeconds"] == 1
    assert lease_time(release["renewTime"]) >= signalled - datetime.timedelta(milliseconds=1)
    assert (taken["holderIdentity"], taken["leaseTransitions"]) == (b.name, transitions + 1)
    assert taken["leaseDurationSeconds"] == SHIPPED.lease_duration
    took_over = lease_time(taken["acquireTime"])
    # The follower retries every retry period (with jitter): it takes the released Lease at its next try.
    assert took_over - lease_time(release["renewTime"]) <= datetime.timedelta(seconds=2 * SHIPPED.retry_period)
    assert took_over - signalled < datetime.timedelta(seconds=SHIPPED.lease_duration - SHIPPED.retry_period)
    said = a.logs()
    assert said.index("stopped leading") < said.index("released the lease") < said.index("sidecar stopped")
    assert b.ready()
