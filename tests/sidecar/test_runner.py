"""The wired sidecar: leader election, the first pass on winning the Lease, an event over real HTTP
triggering an early re-check, and a clean shutdown that releases the Lease."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest

from policies.config import PolicyConfig
from policies.kinds import CONFIG_MAP, LEASE
from policies.sidecar_config import SidecarConfig
from tests.sidecar.conftest import NS, T0, WARDEN_NS, Counting, World, counting_factory
from tests.support.registry import RegistryServer, free_port, push_ocm_component
from webhook.kube.client import Kube, NotFound
from webhook.kube.leader import LeaseTiming
from webhook.sidecar.runner import LEASE_NAME, Sidecar, SidecarSettings

pytestmark = pytest.mark.anyio

REPO = "ocm/component-descriptors/example.com/demo"


async def until(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def reason(world: World, name: str) -> str:
    conditions = (world.get(name).get("status") or {}).get("conditions") or [{}]
    return str(conditions[0].get("reason", ""))


async def test_leader_runs_passes_serves_events_and_releases_the_lease(
    registry: RegistryServer, world: World, kube: Kube, counting: Counting
) -> None:
    with registry.http() as http:
        pushed = push_ocm_component(http, "ocm", "example.com/demo", "1.0.0")
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo")
    world.version("one", "example-com-demo", "1.0.0")
    ticks = iter(range(10_000))
    config = PolicyConfig(
        sidecar=SidecarConfig.model_validate(
            {"availability": {"interval": "1h"}, "referencedSet": {"namespace": WARDEN_NS}}
        )
    )
    port = free_port()
    sidecar = Sidecar(
        kube,
        config,
        SidecarSettings(namespace=WARDEN_NS, identity="pod-a", events_host="127.0.0.1", events_port=port),
        clock=lambda: T0 + timedelta(seconds=next(ticks)),
        client_factory=counting_factory(counting),
        lease_timing=LeaseTiming(lease_duration=3, renew_deadline=2.0, retry_period=0.5),
    )
    task = asyncio.create_task(sidecar.run())
    try:
        await until(lambda: reason(world, "one") == "ArtifactResolved", "the first pass")
        await until(lambda: _exists(kube, CONFIG_MAP, "catalog-warden-referenced-set"), "the referenced set")
        assert kube.get(LEASE, LEASE_NAME, WARDEN_NS)["spec"]["holderIdentity"] == "pod-a"

        with registry.http() as http:
            http.delete(f"/v2/{REPO}/manifests/{pushed.digest}")
        event = {
            "specversion": "1.0",
            "id": "1",
            "source": "zotregistry.dev",
            "type": "zotregistry.image.deleted",
            "data": {"name": REPO, "reference": "1.0.0"},
        }
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"http://127.0.0.1:{port}/events",
                content=json.dumps(event),
                headers={"Content-Type": "application/cloudevents+json"},
            )
        assert answer.json() == {"matched": [f"{NS}/one"], "ignored": 0}
        # the interval is an hour: only the early re-check can notice the miss now
        await until(lambda: reason(world, "one") == "Pending", "the early re-check")
    finally:
        sidecar.stop()
        await asyncio.wait_for(task, 30)
    assert "holderIdentity" not in kube.get(LEASE, LEASE_NAME, WARDEN_NS)["spec"], "the Lease is released"
    assert kube.get(CONFIG_MAP, "catalog-warden-referenced-set", WARDEN_NS)["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "catalog-warden",
        "app.kubernetes.io/component": "referenced-set",
    }


def _exists(kube: Kube, kind, name: str) -> bool:
    try:
        kube.get(kind, name, WARDEN_NS)
    except NotFound:
        return False
    return True
