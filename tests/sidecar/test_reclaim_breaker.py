"""The circuit breaker against docker-registry and the apiserver double: held plans, Events, the metric, confirmation.

Issue 11, defect 2: a Component whose repository maps every ComponentVersion into a repository
that does not exist left the real repository unkept, and reclamation deleted all of its
manifests as soon as they passed the safety age.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from policies.kinds import EVENT, REGISTRY
from policies.reclaim import CONFIRM_ANNOTATION, RECLAIM_ANNOTATION, TripReason
from policies.sidecar_config import ReclaimConfig, ReferencedSetConfig
from tests.sidecar.conftest import NS, T0, WARDEN_NS, Counting, World, counting_factory, secret_reader
from tests.support.registry import RegistryServer, push_ocm_component
from webhook.kube.cache import InformerCache
from webhook.kube.client import Kube
from webhook.kube.writes import Writer
from webhook.sidecar.clients import RegistryClients
from webhook.sidecar.metrics import SidecarMetrics
from webhook.sidecar.reclaim import (
    EVENT_REASON,
    EVENT_REASON_DRY_RUN,
    EVENT_REASON_HELD,
    Reclaimer,
    RefusalWhy,
    RegistryReport,
)
from webhook.sidecar.referenced_set import ReferencedSetPublisher

pytestmark = pytest.mark.anyio

REAL_REPO = "ocm/component-descriptors/example.com/demo"
TYPO_REPO = "ocm/component-descriptors/example.com/demo-typo"
VERSIONS = [f"1.0.{i}" for i in range(15)]


class Loops:
    """The referenced-set publisher and the reclaimer as the runner wires them, Events through the real Writer."""

    def __init__(self, cache: InformerCache, kube: Kube, counting: Counting, **config: Any) -> None:
        self.metrics = SidecarMetrics()
        self.publisher = ReferencedSetPublisher(cache, kube, ReferencedSetConfig(namespace=WARDEN_NS), self.metrics)
        clients = RegistryClients(cache, secret_reader(kube), counting_factory(counting))
        writer = Writer(kube, instance="pod-a")
        self.reclaimer = Reclaimer(
            cache, clients, ReclaimConfig(**config), writer.emit_event, self.metrics, fresh=self.publisher.fresh
        )

    async def run(self, now: Any) -> tuple[str, list[str]]:
        report = await self.report(now)
        return report.refused, report.removed

    async def report(self, now: Any) -> RegistryReport:
        published = await self.publisher.publish(now)
        (report,) = await self.reclaimer.run_once(published.reclaimable, now)
        return report

    def refusals(self, registry: str, why: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "catalog_warden_reclaim_refusals_total", {"registry": registry, "why": why}
        )
        return value or 0.0


def events(admin: Kube, reason: str) -> list[tuple[str, str, str, str]]:
    found = [e for e in admin.list(EVENT, NS)["items"] if e["reason"] == reason]
    return [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["message"]) for e in found]


def manifests_left(registry: RegistryServer, versions: list[str]) -> list[str]:
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    with registry.http() as http:
        return [v for v in versions if http.head(f"/v2/{REAL_REPO}/manifests/{v}", headers=accept).status_code == 200]


async def test_a_component_mapped_to_a_missing_repository_reclaims_nothing_until_the_plan_is_confirmed(
    registry: RegistryServer, world: World, cache: InformerCache, kube: Kube, admin: Kube
) -> None:
    with registry.http() as http:
        for version in VERSIONS:
            push_ocm_component(http, "ocm", "example.com/demo", version, version.encode())
    # the misconfiguration: every entry maps into example.com/demo-typo, which the registry does not hold
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo-typo")
    for version in VERSIONS:
        world.version(f"demo-{version.replace('.', '-')}", "example-com-demo", version)
    world.registry("reg", registry.hostname, annotations={RECLAIM_ANNOTATION: "distribution-delete"})
    world.settle()
    counting = Counting()
    loops = Loops(cache, kube, counting, safetyAge="1h")
    host = registry.hostname

    assert await loops.run(T0) == ("", []), "first listing: everything is younger than the safety age"
    report = await loops.report(T0 + timedelta(hours=1, seconds=3))
    assert report.plan is not None
    refused, removed, fingerprint = report.refused, report.removed, report.plan.fingerprint
    expected = (
        f"circuit breaker: nothing is reclaimed in {host} until an operator confirms this plan of 15 removal(s) "
        f"with the Registry annotation catalog-warden.io/reclaim-confirm={fingerprint}: "
        f"{TYPO_REPO} is kept by the referenced set but is not in the registry's catalog "
        "(does a Component map its versions to the wrong repository?); "
        f"{REAL_REPO}: 15 of 15 tag(s) would go, more than reclaim.maxRemovalShare 0.5"
    )
    assert (refused, removed) == (expected, [])
    assert counting.of("DELETE") == []
    assert manifests_left(registry, VERSIONS) == VERSIONS
    assert events(admin, EVENT_REASON_HELD) == [("Registry", "reg", "Warning", expected)]
    assert loops.refusals(host, "unresolved") == 1

    # the same plan next pass: held and counted again, but the operator is told once
    assert await loops.run(T0 + timedelta(hours=1, minutes=5)) == (expected, [])
    assert loops.refusals(host, "unresolved") == 2
    assert len(events(admin, EVENT_REASON_HELD)) == 1

    # a confirmation of another plan changes nothing
    world.admin.patch(REGISTRY, "reg", NS, {"metadata": {"annotations": {CONFIRM_ANNOTATION: "0123456789abcdef"}}})
    world.settle()
    assert await loops.run(T0 + timedelta(hours=1, minutes=10)) == (expected, [])

    # the operator confirms the printed fingerprint: that plan, and only that plan, goes through
    world.admin.patch(REGISTRY, "reg", NS, {"metadata": {"annotations": {CONFIRM_ANNOTATION: fingerprint}}})
    world.settle()
    refused, removed = await loops.run(T0 + timedelta(hours=1, minutes=15))
    assert (refused, len(removed)) == ("", 15)
    assert len(counting.of("DELETE")) == 15
    assert manifests_left(registry, VERSIONS) == []
    assert [e[:3] for e in events(admin, EVENT_REASON)] == [("Registry", "reg", "Normal")]


async def test_a_pass_that_would_remove_more_than_the_share_is_held_and_counted(
    registry: RegistryServer, world: World, cache: InformerCache, kube: Kube, admin: Kube
) -> None:
    versions = ["1.0.0", "0.9.0", "0.8.0"]
    with registry.http() as http:
        for version in versions:
            push_ocm_component(http, "ocm", "example.com/demo", version, version.encode())
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo")
    world.version("current", "example-com-demo", "1.0.0")
    world.registry("reg", registry.hostname, annotations={RECLAIM_ANNOTATION: "distribution-delete"})
    world.settle()
    counting = Counting()
    host = registry.hostname

    held = Loops(cache, kube, counting, safetyAge="0s")
    report = await held.report(T0)
    assert report.plan is not None
    refused, removed, fingerprint = report.refused, report.removed, report.plan.fingerprint
    expected = (
        f"circuit breaker: nothing is reclaimed in {host} until an operator confirms this plan of 2 removal(s) "
        f"with the Registry annotation catalog-warden.io/reclaim-confirm={fingerprint}: "
        f"{REAL_REPO}: 2 of 3 tag(s) would go, more than reclaim.maxRemovalShare 0.5"
    )
    assert (refused, removed) == (expected, [])
    assert (held.refusals(host, "share"), held.refusals(host, "unresolved")) == (1, 0)
    assert events(admin, EVENT_REASON_HELD) == [("Registry", "reg", "Warning", expected)]
    assert counting.of("DELETE") == [] and manifests_left(registry, versions) == versions

    # in dry-run a held plan also lists what it holds, so the operator can judge it before confirming
    dry = Loops(cache, kube, counting, safetyAge="0s", dryRun=True)
    report = await dry.report(T0)
    assert report.refused == expected and len(report.removed) == 2
    [(kind, name, severity, message)] = events(admin, EVENT_REASON_DRY_RUN)
    assert (kind, name, severity) == ("Registry", "reg", "Normal")
    assert message == (
        f"would remove, once plan {fingerprint} is confirmed, 2 artifact(s) not in referenced set generation 1: "
        + ", ".join(report.removed)
    )
    assert counting.of("DELETE") == [] and manifests_left(registry, versions) == versions

    # a share the operator configured above 2/3 lets the same pass through
    loose = Loops(cache, kube, counting, safetyAge="0s", maxRemovalShare=0.7)
    refused, removed = await loose.run(T0)
    assert (refused, len(removed), loose.refusals(host, "share")) == ("", 2, 0)
    assert manifests_left(registry, versions) == ["1.0.0"]


def test_every_breaker_reason_is_a_refusal_label() -> None:
    """The metric's ``why`` is a closed set; a new trip reason must be added to it, not crash a pass."""
    assert {str(r) for r in TripReason} <= {str(w) for w in RefusalWhy}
