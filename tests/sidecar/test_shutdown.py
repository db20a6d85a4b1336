"""Shutdown and leadership of the sidecar: SIGTERM releases the Lease, a replica that cannot
campaign says why on /readyz and in one warning.

The hand-over runs two real ``catalog-warden sidecar`` processes against the double with the
shipped timing (15 s lease, 2 s retry), sends the leader the real signal, and reads what happened
from the Lease's own fields (every Lease the double stored is recorded, so the brief released
state is seen even though the successor overwrites it within one retry period). The readiness
tests run the sidecar in this process with a short retry period and count its attempts.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from policies.config import PolicyConfig
from policies.kinds import LEASE, NAMESPACE
from policies.sidecar_config import SidecarConfig
from tests.sidecar.conftest import T0, WARDEN, WARDEN_NS
from tests.sidecar.test_runner import until
from tests.support.apiserver import ApiServerDouble
from tests.support.apiserver import errors as double_errors
from tests.support.registry import free_port
from tests.support.server import REPO, wait_until
from webhook.kube.client import Kube
from webhook.kube.leader import MICRO_TIME, LeaseTiming
from webhook.sidecar.runner import LEASE_NAME, Sidecar, SidecarSettings

SHIPPED = LeaseTiming()
"""What `catalog-warden sidecar` uses: client-go's 15 s / 10 s / 2 s."""
FAST = LeaseTiming(lease_duration=3, renew_deadline=2.0, retry_period=0.1)


def lease_time(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, MICRO_TIME).replace(tzinfo=datetime.UTC)


class Leases:
    """Every Lease the double stored (create and update answers), in order."""

    def __init__(self, double: ApiServerDouble) -> None:
        self.stored: list[dict[str, Any]] = []
        self.attempts = 0
        self.lock = threading.Lock()
        api = double.api
        for verb in ("get", "create", "update"):
            setattr(api, verb, self._wrap(getattr(api, verb), verb))

    def _wrap(self, original: Callable[..., Any], verb: str) -> Callable[..., Any]:
        def wrapper(target: Any, *args: Any) -> Any:
            if target.resource.plural != "leases":
                return original(target, *args)
            with self.lock:
                self.attempts += verb == "get"
            answer = original(target, *args)
            if verb != "get":
                with self.lock:
                    self.stored.append(answer.body)
            return answer

        return wrapper

    def specs(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(lease["spec"]) for lease in self.stored]


# ---- SIGTERM: the Lease is released, the other replica takes over at once -----------------------


class SidecarProcess:
    """``catalog-warden sidecar`` as the Deployment runs it, as the warden, on 127.0.0.1."""

    def __init__(self, double: ApiServerDouble, tmp_path: Path, identity: str) -> None:
        self.identity = identity
        self.port = free_port()
        kubeconfig = tmp_path / f"kubeconfig-{identity}"
        token = double.configuration(WARDEN).api_key["authorization"]
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": double.url}}],
                    "users": [{"name": "u", "user": {"token": token}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )
        self.log = tmp_path / f"sidecar-{identity}.log"
        cmd = [
            sys.executable, "-m", "webhook.cli", "sidecar", "--kubeconfig", str(kubeconfig),
            "--identity", identity, "--namespace", WARDEN_NS,
            "--events-host", "127.0.0.1", "--events-port", str(self.port),
        ]  # fmt: skip
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())

    def readyz(self) -> tuple[int, str]:
        try:
            answer = httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=1)
        except httpx.HTTPError as exc:
            return 0, str(exc)
        return answer.status_code, answer.text

    def wait_ready(self) -> None:
        wait_until(lambda: self.readyz()[0] == 200 or self.proc.poll() is not None, what=f"{self.identity} ready")
        assert self.proc.poll() is None, self.log.read_text()

    def logged(self) -> list[dict[str, Any]]:
        """The JSON log lines (stderr and stdout share the file)."""
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.startswith("{")]

    def messages(self) -> list[str]:
        return [entry["msg"] for entry in self.logged()]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def sidecars(apiserver: ApiServerDouble, admin: Kube, tmp_path: Path) -> Iterator[Callable[[str], SidecarProcess]]:
    started: list[SidecarProcess] = []

    def start(identity: str) -> SidecarProcess:
        started.append(SidecarProcess(apiserver, tmp_path, identity))
        return started[-1]

    yield start
    for sidecar in started:
        sidecar.kill()


def holder(kube: Kube) -> str:
    return str(kube.get(LEASE, LEASE_NAME, WARDEN_NS)["spec"].get("holderIdentity") or "")


def test_sigterm_releases_the_lease_and_the_follower_takes_over_at_once(
    apiserver: ApiServerDouble, kube: Kube, sidecars: Callable[[str], SidecarProcess]
) -> None:
    leases = Leases(apiserver)
    a = sidecars("a")
    a.wait_ready()
    wait_until(lambda: holder(kube) == "a", what="a leads")
    b = sidecars("b")
    b.wait_ready()
    wait_until(lambda: any(e["msg"] == "new leader" and e["leader"] == "a" for e in b.logged()), what="b sees a")
    assert b.readyz() == (200, "ok"), "a follower that sees a valid Lease held by another can campaign: it is ready"

    signalled = datetime.datetime.now(datetime.UTC)
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(timeout=30) == 0, a.log.read_text()
    wait_until(lambda: holder(kube) == "b", timeout=SHIPPED.lease_duration, what="b takes over")

    specs = leases.specs()
    released = next(i for i, spec in enumerate(specs) if "holderIdentity" not in spec)
    release, taken = specs[released], specs[released + 1]
    assert release["leaseDurationSeconds"] == 1
    assert lease_time(release["renewTime"]) >= signalled - datetime.timedelta(milliseconds=1)
    assert all(spec["holderIdentity"] == "a" for spec in specs[:released]), "a renewed until the release"
    assert (taken["holderIdentity"], taken["leaseTransitions"]) == ("b", 1)
    took_over = lease_time(taken["acquireTime"])
    # Without the release b waits out the 15 s lease from the last renewal it saw: at best 13 s.
    assert took_over - lease_time(release["renewTime"]) <= datetime.timedelta(seconds=2 * SHIPPED.retry_period)
    assert took_over - signalled < datetime.timedelta(seconds=SHIPPED.lease_duration - SHIPPED.retry_period)
    said = a.messages()
    assert said.index("stopped leading") < said.index("released the lease") < said.index("sidecar stopped")


# ---- a replica that cannot campaign is not ready, and says why once ----------------------------


def quiet_config() -> PolicyConfig:
    """No loop has anything to do: only the campaign matters here."""
    off = {"enabled": False}
    return PolicyConfig(
        sidecar=SidecarConfig.model_validate(
            {"availability": off, "referencedSet": off, "chartIndex": off, "retention": off, "packages": off}
        )
    )


async def readyz(port: int) -> tuple[int, str]:
    async with httpx.AsyncClient() as http:
        answer = await http.get(f"http://127.0.0.1:{port}/readyz")
    return answer.status_code, answer.text


CannotCampaign = Callable[[str], Any]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("namespace", "deny", "reason"),
    [
        (
            "missing",
            False,
            'cannot create the Lease missing/catalog-warden-sidecar: 404 NotFound: namespaces "missing" not found',
        ),
        (
            WARDEN_NS,
            True,
            "cannot get the Lease catalog-warden/catalog-warden-sidecar: 403 Forbidden: "
            'leases.coordination.k8s.io "catalog-warden-sidecar" is forbidden: User '
            f'"{WARDEN}" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace '
            '"catalog-warden"',
        ),
    ],
    ids=["missing-namespace", "forbidden"],
)
async def test_a_sidecar_that_cannot_campaign_is_not_ready_and_warns_once(
    apiserver: ApiServerDouble,
    admin: Kube,
    kube: Kube,
    caplog: pytest.LogCaptureFixture,
    namespace: str,
    deny: bool,
    reason: str,
) -> None:
    denied = threading.Event()
    if deny:
        denied.set()
        original = apiserver.api.get

        def get(target: Any) -> Any:
            if target.resource.plural == "leases" and denied.is_set():
                detail = (
                    f'User "{WARDEN}" cannot get resource "leases" in API group "coordination.k8s.io" '
                    f'in the namespace "{target.namespace}"'
                )
                raise double_errors.forbidden("leases", "coordination.k8s.io", target.name, detail)
            return original(target)

        apiserver.api.get = get  # type: ignore[method-assign]
    leases = Leases(apiserver)  # outside the denial: it counts the refused attempts too
    port = free_port()
    sidecar = Sidecar(
        kube,
        quiet_config(),
        SidecarSettings(namespace=namespace, identity="pod-a", events_host="127.0.0.1", events_port=port),
        clock=lambda: T0,
        lease_timing=FAST,
    )
    caplog.set_level(logging.INFO, logger="catalog_warden.leader")
    task = asyncio.create_task(sidecar.run())
    try:
        # readiness names the cache first while it syncs: wait for both, so only the Lease is left to say
        await until(lambda: leases.attempts >= 5 and sidecar.cache.synced, "five failed attempts, cache synced")
        assert await readyz(port) == (503, reason)
        warnings = [r for r in caplog.records if r.getMessage() == "cannot take or renew the lease"]
        assert len(warnings) == 1, [r.__dict__.get("fields") for r in warnings]
        fields = warnings[0].__dict__["fields"]
        assert fields["lease"] == f"{namespace}/{LEASE_NAME}"
        assert reason.endswith(fields["error"])
        assert fields["fix"].startswith("create namespace missing" if not deny else "grant get, create, update")

        # the cause goes away: the next attempt wins, readiness is back, and that is said once
        if deny:
            denied.clear()
        else:
            admin.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        await until(lambda: sidecar.leading.is_set(), "pod-a leads")
        assert await readyz(port) == (200, "ok")
        assert [r.getMessage() for r in caplog.records].count("lease reachable again") == 1
    finally:
        sidecar.stop()
        await asyncio.wait_for(task, 30)


# ---- nothing this replica writes lands after its release ---------------------------------------


@pytest.mark.anyio
async def test_a_write_in_flight_at_shutdown_lands_before_the_release(apiserver: ApiServerDouble, kube: Kube) -> None:
    """The referenced set's ConfigMap create is held in the double while the sidecar stops.

    The elector keeps renewing while the cancelled loop's write is still in its worker thread;
    once two renewals came after the stop (the loops are cancelled by then: only a stopped elector
    would be silent), the write is let through. The release must come after it.
    """
    order: list[str] = []
    held, proceed = threading.Event(), threading.Event()
    original = apiserver.api.create

    def create(target: Any, *args: Any) -> Any:
        if target.resource.plural != "configmaps":
            return original(target, *args)
        held.set()
        assert proceed.wait(20), "never let through"
        answer = original(target, *args)
        order.append("configmap written")
        return answer

    apiserver.api.create = create  # type: ignore[method-assign]
    stored = apiserver.api.update

    def update(target: Any, *args: Any) -> Any:
        answer = stored(target, *args)
        if target.resource.plural == "leases" and "holderIdentity" not in answer.body["spec"]:
            order.append("lease released")
        return answer

    apiserver.api.update = update  # type: ignore[method-assign]
    leases = Leases(apiserver)
    config = PolicyConfig(
        sidecar=SidecarConfig.model_validate(
            {
                "availability": {"enabled": False},
                "chartIndex": {"enabled": False},
                "packages": {"enabled": False},
                "referencedSet": {"namespace": WARDEN_NS},
            }
        )
    )
    sidecar = Sidecar(
        kube,
        config,
        SidecarSettings(namespace=WARDEN_NS, identity="pod-a", events_host="127.0.0.1", events_port=free_port()),
        clock=lambda: T0,
        lease_timing=FAST,
    )
    task = asyncio.create_task(sidecar.run())
    await until(held.is_set, "the referenced set's write in flight")
    stopped_at = len(leases.specs())
    sidecar.stop()

    def renewed_twice_or_released() -> bool:
        after = leases.specs()[stopped_at:]
        return bool(order) or sum(spec.get("holderIdentity") == "pod-a" for spec in after) >= 2

    await until(renewed_twice_or_released, "two renewals after the stop, or the release")
    proceed.set()
    await asyncio.wait_for(task, 30)
    assert order == ["configmap written", "lease released"]
