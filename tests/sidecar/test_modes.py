"""The install mode switches the loops that do an upstream controller's work (DESIGN.md section 3).

Alongside Porch and operator-helm (the default) the package bookkeeping and the chart index are
off, because upstream's controllers do that work; standalone turns them on. One switch: the mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest

from policies.config import PolicyConfig
from policies.kinds import COMPONENT, COMPONENT_VERSION, PACKAGE_REVISION, REGISTRY, REPOSITORY
from tests.sidecar.conftest import T0, WARDEN_NS
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube
from webhook.sidecar.runner import Sidecar, SidecarSettings

pytestmark = pytest.mark.anyio
OFF = {"enabled": False}


@pytest.fixture
def porch_cache(kube: Kube) -> Iterator[InformerCache]:
    c = InformerCache(kube, (COMPONENT, COMPONENT_VERSION, REGISTRY, PACKAGE_REVISION, REPOSITORY)).start()
    assert c.wait_synced(10), "informer cache did not sync"
    yield c
    c.stop()


@pytest.mark.parametrize(
    ("families", "runs"),
    [
        ({}, set()),
        ({"packages": {"mode": "standalone"}}, {"packages"}),
        ({"charts": {"mode": "standalone"}}, {"charts"}),
        ({"packages": {"mode": "standalone"}, "charts": {"mode": "standalone"}}, {"packages", "charts"}),
        ({"packages": {"mode": "alongside"}, "charts": False}, set()),
    ],
)
async def test_the_mode_switches_the_upstream_loops(
    kube: Kube, porch_cache: InformerCache, families: dict, runs: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = PolicyConfig.model_validate(
        {"families": families, "sidecar": {"availability": OFF, "referencedSet": {**OFF, "namespace": WARDEN_NS}}}
    )
    sidecar = Sidecar(kube, config, SidecarSettings(namespace=WARDEN_NS, identity="pod-a"), cache=porch_cache)
    ran: set[str] = set()

    async def chart_pass(now: datetime) -> None:
        ran.add("charts")

    monkeypatch.setattr(sidecar.chart_index, "run_once", chart_pass)
    if sidecar.packages is not None:
        bookkeeper = sidecar.packages

        async def package_pass(now: datetime) -> object:
            ran.add("packages")
            return await bookkeeper.__class__.run_once(bookkeeper, now)

        monkeypatch.setattr(bookkeeper, "run_once", package_pass)
    await sidecar.pass_once(T0)
    await sidecar.clients.aclose()
    assert ran == runs
    assert (sidecar.packages is not None) == ("packages" in runs)
