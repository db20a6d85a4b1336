"""High availability of the server: two replicas behind the Service, one lost under a write load.

Two ``catalog-warden serve`` processes are the Service's endpoints (one EndpointSlice each, as
two pods' would be). 200 guarded creates (Releases) from 4 threads go through kube-apiserver;
half bind an unavailable ComponentVersion and must get our denial, half bind one not created yet
and must be stored (with our warning). Mid-load one replica goes away; every write must still get
exactly its expected answer, none a webhook call error.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.support.controlplane.cluster import Cluster, ServerProcess, wait_for
from webhook.kube.client import ApiError, Kube

WRITES = 200
THREADS = 4
LOST_AFTER = 50
"""Writes answered before the replica goes: both replicas have answered some by then."""
VERSIONS = "/apis/solar.opendefense.cloud/v1alpha1/namespaces/{ns}/componentversions"
RELEASES = "/apis/solar.opendefense.cloud/v1alpha1/namespaces/{ns}/releases"
UNAVAILABLE = "demo-1-0-0"
HOOK = "catalog.validate.catalog-warden.io"
DENIAL = f'admission webhook "{HOOK}" denied the request: Release {{ns}}/{{name}} denied by catalog.release-binding: '
CALL_FAILED = f'Internal error occurred: failed calling webhook "{HOOK}": failed to call webhook: '
ANSWERED = re.compile(r'^catalog_warden_admission_requests_total\{[^}]*family="catalog"[^}]*\} (\S+)$', re.M)


def release(name: str, ns: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "Release",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"componentVersionRef": {"name": version}},
    }


def answered(process: ServerProcess) -> float:
    """Catalog admission requests this replica answered (its /metrics)."""
    text = httpx.get(f"{process.probe_url}/metrics", timeout=5.0).text
    return sum(float(v) for v in ANSWERED.findall(text))


def unavailable_version(admin: Kube, warden_kube: Kube, ns: str) -> None:
    """A ComponentVersion the sidecar's identity marked Available=False, as its availability loop would."""
    versions = VERSIONS.format(ns=ns)
    body = {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "ComponentVersion",
        "metadata": {"name": UNAVAILABLE, "namespace": ns},
        "spec": {"componentRef": {"name": "demo"}, "tag": "1.0.0"},
    }
    admin.request("POST", versions, body=body)
    condition = {
        "type": "Available", "status": "False", "reason": "ArtifactMissing",
        "lastTransitionTime": "2026-11-29T10:00:00Z", "message": "manifest unknown",
    }  # fmt: skip
    warden_kube.request(
        "PATCH", f"{versions}/{UNAVAILABLE}", body={"status": {"conditions": [condition]}},
        content_type="application/merge-patch+json",
    )  # fmt: skip


def denied_now(admin: Kube, ns: str) -> bool:
    try:
        admin.request("POST", RELEASES.format(ns=ns), query=[("dryRun", "All")], body=release("probe", ns, UNAVAILABLE))
    except ApiError as exc:
        if exc.status == 403:
            return True
        raise
    return False


@dataclass
class Load:
    """The bounded write load and what each write got: 'stored', 'denied' or the unexpected answer."""

    cluster: Cluster
    ns: str
    outcomes: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    local: threading.local = field(default_factory=threading.local)

    @staticmethod
    def expected(i: int) -> str:
        return "denied" if i % 2 else "stored"

    def write(self, i: int, answered: threading.Event) -> None:
        if not hasattr(self.local, "kube"):
            self.local.kube = self.cluster.kube(self.cluster.plane.kubeconfig)
        name = f"web-{i:03d}"
        version = UNAVAILABLE if i % 2 else "not-created-yet"
        try:
            self.local.kube.request("POST", RELEASES.format(ns=self.ns), body=release(name, self.ns, version))
            outcome = "stored"
        except ApiError as exc:
            ours = exc.status == 403 and exc.message.startswith(DENIAL.format(ns=self.ns, name=name))
            outcome = "denied" if ours else f"{exc.status} {exc.message}"
        with self.lock:
            self.outcomes[name] = outcome
            if len(self.outcomes) % WRITES >= LOST_AFTER:
                answered.set()

    def run(self, first: int, lose: Callable[[], None] = lambda: None) -> None:
        """``WRITES`` writes numbered from ``first``, with ``lose()`` called once ``LOST_AFTER`` are answered."""
        answered = threading.Event()
        with ThreadPoolExecutor(THREADS) as pool:
            futures = [pool.submit(self.write, i, answered) for i in range(first, first + WRITES)]
            assert answered.wait(120), "the load did not get going"
            lose()
            for future in futures:
                future.result()

    def unexpected(self) -> dict[str, str]:
        return {n: o for n, o in sorted(self.outcomes.items()) if o != self.expected(int(n.split("-")[1]))}


@pytest.fixture
def two_replicas(
    cluster: Cluster, server: ServerProcess, admin: Kube, warden_kube: Kube, ns: str,
    new_server: Callable[..., ServerProcess],
) -> tuple[ServerProcess, ServerProcess]:  # fmt: skip
    """The session's server and a second one, both endpoints, both having denied the unavailable binding."""
    unavailable_version(admin, warden_kube, ns)
    wait_for(lambda: denied_now(admin, ns), "the session's server to see Available=False")
    second = new_server("server-b", endpoint=True).start()  # its first list holds the condition
    # kube-apiserver resolves the Service when it dials and keeps its connections alive (its pool
    # is all to the first replica now): restarting that one closes them, so the next concurrent
    # calls dial again, each to a random endpoint, until one of them is the second replica's.
    with ThreadPoolExecutor(THREADS) as pool:

        def both_called() -> bool:
            server.restart()
            return all(pool.map(lambda _: denied_now(admin, ns), range(THREADS))) and answered(second) > 0

        wait_for(both_called, "kube-apiserver to dial the second replica", 90)
    return server, second


def losing(second: ServerProcess, how: Callable[[], None]) -> Callable[[], None]:
    """``how`` the replica goes, once it has answered some of the load."""
    before = answered(second)

    def lose() -> None:
        wait_for(lambda: answered(second) > before, f"{second.name} to answer some of the load", 30)
        how()

    return lose


def test_a_replica_killed_under_load_costs_at_most_the_calls_dialled_to_it_until_its_endpoint_goes(
    two_replicas: tuple[ServerProcess, ServerProcess], cluster: Cluster, ns: str
) -> None:
    """SIGKILL: no drain. Calls on connections already open to the survivor, and the calls whose
    connection to the killed one was reset (kube-apiserver retries those), get their answers; a call
    that kube-apiserver dials to the dead endpoint is refused and failurePolicy Fail refuses the
    write, until the endpoint leaves the Service. No write ever gets a wrong decision."""
    _, second = two_replicas
    load = Load(cluster, ns)

    load.run(0, losing(second, second.kill))

    # What kube-apiserver does (k8s.io/apiserver 0.35): one endpoint per dial, no second try on
    # another. A call in flight on the killed replica fails ("connection reset by peer" naming its
    # port, or a bare "EOF"), a call dialled to it fails ("connection refused"); failurePolicy
    # Fail refuses those writes.
    dead = f"127.0.0.1:{second.port}"
    lost = load.unexpected()
    on_the_dead_one = {
        n: o for n, o in lost.items() if o.startswith(f"500 {CALL_FAILED}") and (dead in o or o.endswith('": EOF'))
    }
    assert {n: o for n, o in lost.items() if n not in on_the_dead_one} == {}
    # Its endpoint gone (the kubelet marks the pod unready, the EndpointSlice controller drops it):
    # nothing is lost any more.
    cluster.remove_endpoint(second.name)
    load.run(WRITES)
    assert load.unexpected() == lost
    print(f"SIGKILL under load: {len(lost)} of {WRITES} writes refused: {sorted(lost.values())}")


def test_a_replica_stopped_with_sigterm_under_load_loses_nothing(
    two_replicas: tuple[ServerProcess, ServerProcess], cluster: Cluster, ns: str
) -> None:
    """A rolling update or a drain: the endpoint leaves the Service as the pod terminates (the test
    marks it not ready first, as the EndpointSlice controller does), then SIGTERM drains: the
    listener closes, the calls in flight get their answers, the process exits 0."""
    _, second = two_replicas
    load = Load(cluster, ns)

    def terminate() -> None:
        cluster.point_service_at(second.name, second.port, ready=False)
        second.stop()

    load.run(0, losing(second, terminate))

    assert load.unexpected() == {}
    assert second.popen is not None and second.popen.returncode == 0
