"""Leader election with candidates in separate processes against one double.

Each candidate appends `started ID` / `stopped ID` / `leader ID HOLDER` lines to one shared log, one
write per line with O_APPEND, so the file's order is the order in which callbacks ran across processes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from policies.kinds import LEASE, NAMESPACE
from tests.kube.conftest import WARDEN
from tests.kube.tcp_proxy import TcpProxy
from tests.support.apiserver import ApiServerDouble
from tests.support.server import wait_until
from webhook.kube.client import Kube
from webhook.kube.leader import LeaseTiming

SCRIPT = Path(__file__).with_name("leader_candidate.py")
LEASE_NS, LEASE_NAME = "catalog-warden", "catalog-warden-sidecar"
TIMING = LeaseTiming(lease_duration=2, renew_deadline=1.0, retry_period=0.2)

Spawn = Callable[..., subprocess.Popen[bytes]]


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def holder(kube: Kube) -> str:
    return str(kube.get(LEASE, LEASE_NAME, LEASE_NS)["spec"].get("holderIdentity") or "")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "election.log"


@pytest.fixture
def spawn(apiserver: ApiServerDouble, kube: Kube, tmp_path: Path, log: Path) -> Iterator[Spawn]:
    kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NS}})
    procs: list[subprocess.Popen[bytes]] = []

    def start(identity: str, server: str | None = None) -> subprocess.Popen[bytes]:
        token = apiserver.configuration(WARDEN).api_key["authorization"]
        kubeconfig = tmp_path / f"kubeconfig-{identity}"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": server or apiserver.url}}],
                    "users": [{"name": "u", "user": {"token": token}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )
        cmd = [
            sys.executable, str(SCRIPT), "--kubeconfig", str(kubeconfig), "--identity", identity,
            "--log", str(log), "--namespace", LEASE_NS, "--lease", LEASE_NAME,
            "--lease-duration", str(TIMING.lease_duration), "--renew-deadline", str(TIMING.renew_deadline),
            "--retry-period", str(TIMING.retry_period),
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(proc)
        wait_until(lambda: f"candidate {identity}" in lines(log) or proc.poll() is not None, what=f"{identity} up")
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_exactly_one_of_two_candidates_leads(spawn: Spawn, kube: Kube, log: Path) -> None:
    spawn("a")
    spawn("b")
    wait_until(lambda: sum(line.startswith("started ") for line in lines(log)) >= 1, what="a leader")
    leader = next(line.split()[1] for line in lines(log) if line.startswith("started "))
    follower = {"a": "b", "b": "a"}[leader]
    wait_until(lambda: f"leader {follower} {leader}" in lines(log), what="the follower sees the leader")
    first = kube.get(LEASE, LEASE_NAME, LEASE_NS)
    wait_until(
        lambda: kube.get(LEASE, LEASE_NAME, LEASE_NS)["spec"]["renewTime"] != first["spec"]["renewTime"],
        what="a renewal",
    )
    assert [line for line in lines(log) if line.startswith(("started", "stopped"))] == [f"started {leader}"]
    lease = kube.get(LEASE, LEASE_NAME, LEASE_NS)["spec"]
    assert (lease["holderIdentity"], lease["leaseDurationSeconds"], lease["leaseTransitions"]) == (leader, 2, 0)
    assert lease["acquireTime"] == first["spec"]["acquireTime"]


def test_killed_leader_is_replaced_within_the_lease_duration(spawn: Spawn, kube: Kube, log: Path) -> None:
    procs = {"a": spawn("a")}
    wait_until(lambda: "started a" in lines(log), what="a leads")
    procs["b"] = spawn("b")
    wait_until(lambda: "leader b a" in lines(log), what="b follows a")
    procs["a"].send_signal(signal.SIGKILL)  # no chance to release the Lease
    killed = time.monotonic()
    wait_until(lambda: "started b" in lines(log), timeout=10, what="b takes over")
    elapsed = time.monotonic() - killed
    # b must wait out the lease as it observed it (renewals stop at most one retry period before the kill) ...
    assert elapsed >= TIMING.lease_duration - TIMING.retry_period - 0.15, elapsed
    # ... and then takes over at its next attempt.
    assert elapsed <= TIMING.lease_duration + 3 * TIMING.retry_period + 0.5, elapsed
    lease = kube.get(LEASE, LEASE_NAME, LEASE_NS)["spec"]
    assert (lease["holderIdentity"], lease["leaseTransitions"]) == ("b", 1)
    assert "stopped a" not in lines(log)


def test_leader_cut_off_from_the_apiserver_stops_before_another_starts(
    apiserver: ApiServerDouble, spawn: Spawn, kube: Kube, log: Path
) -> None:
    host, port = apiserver.url.removeprefix("http://").split(":")
    with TcpProxy((host, int(port))) as proxy:
        spawn("a", server=proxy.url)
        wait_until(lambda: "started a" in lines(log), what="a leads")
        spawn("b")
        wait_until(lambda: "leader b a" in lines(log), what="b follows a")
        proxy.cut()  # a's renewals now hang: the watchdog must stop it at the renew deadline
        cut = time.monotonic()
        wait_until(lambda: "stopped a" in lines(log), timeout=10, what="a stops")
        stopped = time.monotonic() - cut
        wait_until(lambda: "started b" in lines(log), timeout=10, what="b takes over")
    events = [line for line in lines(log) if line.startswith(("started", "stopped"))]
    assert events == ["started a", "stopped a", "started b"]
    assert stopped <= TIMING.renew_deadline + 0.5, stopped
    assert holder(kube) == "b"


def test_graceful_stop_releases_the_lease_for_an_immediate_takeover(spawn: Spawn, kube: Kube, log: Path) -> None:
    a = spawn("a")
    wait_until(lambda: "started a" in lines(log), what="a leads")
    spawn("b")
    wait_until(lambda: "leader b a" in lines(log), what="b follows a")
    a.send_signal(signal.SIGTERM)
    a.wait(timeout=10)
    events = [line for line in lines(log) if line.startswith(("started", "stopped", "exited"))]
    assert events[:3] == ["started a", "stopped a", "exited a"]
    wait_until(lambda: "started b" in lines(log), timeout=TIMING.lease_duration, what="b takes over")


def test_timing_is_validated() -> None:
    with pytest.raises(ValueError, match=r"^lease_duration must be greater than renew_deadline$"):
        LeaseTiming(lease_duration=2, renew_deadline=2.0, retry_period=0.2)
    with pytest.raises(ValueError, match=r"^renew_deadline must be greater than retry_period \* 1.2$"):
        LeaseTiming(lease_duration=3, renew_deadline=1.0, retry_period=1.0)
