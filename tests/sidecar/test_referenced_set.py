"""Referenced-set publication and reclamation against docker-registry, its garbage-collect and the double.

The set keeps every entry present (green or red); only a complete set is published, and only a
complete set and a complete registry listing reclaim anything.
"""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest

from policies.availability import AVAILABLE
from policies.kinds import COMPONENT, CONFIG_MAP, REGISTRY
from policies.reclaim import RECLAIM_ANNOTATION, REFUSED_INCOMPLETE
from policies.referenced_set import CONFIGMAP_KEY
from policies.sidecar_config import ReclaimConfig, ReferencedSetConfig
from tests.sidecar.conftest import NS, T0, WARDEN_NS, Counting, World, Writes
from tests.support.registry import RegistryServer, push_helm_chart, push_ocm_component
from webhook.kube.client import ApiError, Kube
from webhook.sidecar.clients import RegistryClients
from webhook.sidecar.reclaim import MSG_FAILED, MSG_PARTIAL, Reclaimer
from webhook.sidecar.referenced_set import FreshSet, Publication, ReferencedSetPublisher

pytestmark = pytest.mark.anyio

DEMO_REPO = "ocm/component-descriptors/example.com/demo"
OTHER_REPO = "ocm/component-descriptors/example.com/other"
CONFIG_NAME = "catalog-warden-referenced-set"


@pytest.fixture
def pushed(registry: RegistryServer, world: World) -> dict:
    """Kept: demo 1.0.0 (green entry) and 1.1.0 (red entry). Not kept: demo 0.9.0, other 3.0.0.
    Outside component-descriptors/: a chart nobody references, which reclamation must never touch."""
    with registry.http() as http:
        artifacts = {
            "green": push_ocm_component(http, "ocm", "example.com/demo", "1.0.0", b"green"),
            "red": push_ocm_component(http, "ocm", "example.com/demo", "1.1.0", b"red"),
            "orphan": push_ocm_component(http, "ocm", "example.com/demo", "0.9.0", b"orphan"),
            "other": push_ocm_component(http, "ocm", "example.com/other", "3.0.0", b"other"),
            "chart": push_helm_chart(http, "charts", "unmanaged", "1.0.0"),
        }
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo")
    world.version("green", "example-com-demo", "1.0.0")
    world.version("red", "example-com-demo", "1.1.0")
    # a red entry the janitor has not reaped yet: it still keeps its artifact
    world.patch_status(
        "red",
        {
            "conditions": [
                {
                    "type": AVAILABLE,
                    "status": "False",
                    "reason": "ArtifactMissing",
                    "message": "m",
                    "lastTransitionTime": "2026-11-29T11:00:00Z",
                }
            ]
        },
    )
    world.registry("reg", registry.hostname, annotations={RECLAIM_ANNOTATION: "distribution-delete"})
    world.settle()
    return artifacts


def publisher(cache, kube: Kube) -> ReferencedSetPublisher:
    return ReferencedSetPublisher(cache, kube, ReferencedSetConfig(namespace=WARDEN_NS))


def reclaimer(cache, kube: Kube, clients: RegistryClients, **config: object) -> Reclaimer:
    """Reclamation without the share breaker (OTHER_REPO is reclaimed whole); the breaker has its own tests."""
    settings = ReclaimConfig(**{"safetyAge": "0s", "maxRemovalShare": 1.0, **config})
    return Reclaimer(cache, clients, settings, fresh=FreshSet(kube, cache))


def published(kube: Kube) -> dict:
    return json.loads(kube.get(CONFIG_MAP, CONFIG_NAME, WARDEN_NS)["data"][CONFIGMAP_KEY])


async def test_reclamation_and_garbage_collect_free_exactly_the_unreferenced_blobs(
    registry: RegistryServer, pushed: dict, cache, kube: Kube, clients: RegistryClients, writes: Writes
) -> None:
    result = await publisher(cache, kube).publish(T0)
    assert result.result is Publication.PUBLISHED
    assert published(kube) == {
        "complete": True,
        "computedAt": "2026-11-29T12:00:00Z",
        "generation": 1,
        "registries": {registry.hostname: {DEMO_REPO: {"digests": [], "tags": ["1.0.0", "1.1.0"]}}},
    }
    stored = registry.blob_digests()
    reports = await reclaimer(cache, kube, clients).run_once(result.reclaimable, T0)

    assert [(r.registry, r.refused, r.removed, r.failed) for r in reports] == [
        (
            registry.hostname,
            "",
            [f"{DEMO_REPO}@{pushed['orphan'].digest}", f"{OTHER_REPO}@{pushed['other'].digest}"],
            [],
        )
    ]
    registry.stop()
    registry.garbage_collect()
    freed = {p.digest for p in (pushed["orphan"], pushed["other"])} | {*pushed["orphan"].blobs, *pushed["other"].blobs}
    assert stored - registry.blob_digests() == freed
    registry.start()
    with registry.http() as http:
        accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
        for name in ("green", "red", "chart"):
            p = pushed[name]
            assert http.head(f"/v2/{p.repository}/manifests/{p.tag}", headers=accept).status_code == 200, name
    assert writes.of("componentversions") == [] and writes.of(verb="delete") == []


async def test_unchanged_set_is_not_republished_and_a_change_bumps_the_generation(
    registry: RegistryServer, pushed: dict, world: World, cache, kube: Kube, writes: Writes
) -> None:
    pub = publisher(cache, kube)
    assert (await pub.publish(T0)).result is Publication.PUBLISHED
    writes.clear()
    unchanged = await pub.publish(T0 + timedelta(minutes=5))
    assert unchanged.result is Publication.UNCHANGED
    assert unchanged.referenced.generation == 1, "reclamation and its Events name the generation that is published"
    assert writes.of() == []
    world.version("orphan", "example-com-demo", "0.9.0")
    world.settle()
    assert (await pub.publish(T0 + timedelta(minutes=10))).result is Publication.PUBLISHED
    doc = published(kube)
    assert (doc["generation"], doc["computedAt"]) == (2, "2026-11-29T12:10:00Z")
    assert doc["registries"][registry.hostname][DEMO_REPO]["tags"] == ["0.9.0", "1.0.0", "1.1.0"]
    assert [w[:2] for w in writes.of("configmaps")] == [("update", "configmaps")]


async def test_incomplete_set_publishes_nothing_and_reclaims_nothing(
    registry: RegistryServer,
    pushed: dict,
    world: World,
    cache,
    kube: Kube,
    clients: RegistryClients,
    counting: Counting,
    writes: Writes,
) -> None:
    pub = publisher(cache, kube)
    await pub.publish(T0)
    before = kube.get(CONFIG_MAP, CONFIG_NAME, WARDEN_NS)
    # an entry whose Component is gone cannot say what it keeps: the set is incomplete
    world.delete(COMPONENT, "example-com-demo")
    world.settle()
    writes.clear()
    result = await pub.publish(T0 + timedelta(minutes=5))
    assert result.result is Publication.INCOMPLETE
    assert writes.of() == []
    assert kube.get(CONFIG_MAP, CONFIG_NAME, WARDEN_NS) == before, "the last published set stands"

    reports = await reclaimer(cache, kube, clients).run_once(result.reclaimable, T0 + timedelta(minutes=5))
    assert [r.refused for r in reports] == [
        REFUSED_INCOMPLETE.format(
            summary=f"ComponentVersion {NS}/green: Component {NS}/example-com-demo does not exist; "
            f"ComponentVersion {NS}/red: Component {NS}/example-com-demo does not exist"
        )
    ]
    assert counting.requests == [], "an incomplete set costs no registry request"


async def test_a_repository_that_cannot_be_listed_reclaims_nothing_in_that_registry(
    registry: RegistryServer, pushed: dict, cache, kube: Kube, clients: RegistryClients, counting: Counting
) -> None:
    result = await publisher(cache, kube).publish(T0)
    failing = f"/v2/{OTHER_REPO}/tags/list"
    counting.rewrite = lambda request: httpx.Response(500) if request.url.path == failing else None
    reports = await reclaimer(cache, kube, clients).run_once(result.reclaimable, T0)
    assert [(r.removed, r.refused) for r in reports] == [
        ([], MSG_PARTIAL.format(registry=registry.hostname, why=f"GET http://{registry.hostname}{failing}: HTTP 500"))
    ]
    assert all(method != "DELETE" for method, _ in counting.requests)
    with registry.http() as http:
        assert sorted(http.get(f"/v2/{DEMO_REPO}/tags/list").json()["tags"]) == ["0.9.0", "1.0.0", "1.1.0"]


async def test_dry_run_and_cap_remove_nothing_or_at_most_the_cap(
    registry: RegistryServer, pushed: dict, cache, kube: Kube, clients: RegistryClients, counting: Counting
) -> None:
    result = await publisher(cache, kube).publish(T0)
    dry = await reclaimer(cache, kube, clients, dryRun=True).run_once(result.reclaimable, T0)
    assert dry[0].removed == [f"{DEMO_REPO}@{pushed['orphan'].digest}", f"{OTHER_REPO}@{pushed['other'].digest}"]
    assert all(method != "DELETE" for method, _ in counting.requests)

    capped = await reclaimer(cache, kube, clients, perPassCap=1).run_once(result.reclaimable, T0)
    assert (capped[0].removed, capped[0].plan.deferred) == ([f"{DEMO_REPO}@{pushed['orphan'].digest}"], 1)
    assert [p for m, p in counting.requests if m == "DELETE"] == [
        f"/v2/{DEMO_REPO}/manifests/{pushed['orphan'].digest}"
    ]


async def test_nothing_younger_than_the_safety_age_is_removed(
    registry: RegistryServer, pushed: dict, cache, kube: Kube, clients: RegistryClients, counting: Counting
) -> None:
    result = await publisher(cache, kube).publish(T0)
    reclaim = reclaimer(cache, kube, clients, safetyAge="1h")
    first = await reclaim.run_once(result.reclaimable, T0)
    assert first[0].removed == [] and first[0].plan.actions == ()
    later = await reclaim.run_once(result.reclaimable, T0 + timedelta(hours=1))
    assert len(later[0].removed) == 2, "ages count from the first listing"


async def test_unannotated_registry_is_never_listed(
    registry: RegistryServer,
    pushed: dict,
    world: World,
    cache,
    kube: Kube,
    clients: RegistryClients,
    counting: Counting,
) -> None:
    world.admin.patch(
        REGISTRY,
        "reg",
        NS,
        {"metadata": {"annotations": {RECLAIM_ANNOTATION: "yes-please"}}},
    )
    world.settle()
    result = await publisher(cache, kube).publish(T0)
    assert await reclaimer(cache, kube, clients).run_once(result.reclaimable, T0) == []
    assert counting.requests == []


async def test_an_entry_created_while_the_registry_is_listed_keeps_its_artifact(
    registry: RegistryServer,
    pushed: dict,
    world: World,
    cache,
    kube: Kube,
    clients: RegistryClients,
    counting: Counting,
) -> None:
    """The set was computed before the listing; an entry discovery creates in between (for an
    artifact old enough to pass the safety age) must not lose its artifact to that stale set."""
    result = await publisher(cache, kube).publish(T0)

    def discovery_creates_an_entry(request: httpx.Request, response: httpx.Response) -> None:
        if request.url.path == "/v2/_catalog":
            world.version("orphan", "example-com-demo", "0.9.0")
            world.settle()

    counting.after = discovery_creates_an_entry
    reports = await reclaimer(cache, kube, clients).run_once(result.reclaimable, T0)
    assert [(r.refused, r.removed) for r in reports] == [("", [f"{OTHER_REPO}@{pushed['other'].digest}"])]
    with registry.http() as http:
        assert sorted(http.get(f"/v2/{DEMO_REPO}/tags/list").json()["tags"]) == ["0.9.0", "1.0.0", "1.1.0"]


async def test_one_registry_that_fails_does_not_stop_reclamation_in_the_others(
    registry: RegistryServer, pushed: dict, world: World, cache, kube: Kube, counting: Counting
) -> None:
    from tests.sidecar.conftest import counting_factory

    world.registry(
        "a-broken", "broken.example:5000", secret="creds", annotations={RECLAIM_ANNOTATION: "distribution-delete"}
    )
    world.settle()

    def read_secret(namespace: str, name: str) -> dict:
        raise ApiError(0, "Unreachable", "connection refused")

    reclaim = Reclaimer(
        cache,
        RegistryClients(cache, read_secret, counting_factory(counting)),
        ReclaimConfig(safetyAge="0s", maxRemovalShare=1.0),
        fresh=FreshSet(kube, cache),
    )
    result = await publisher(cache, kube).publish(T0)
    reports = await reclaim.run_once(result.reclaimable, T0)
    assert [(r.registry, r.refused, r.removed) for r in reports] == [
        (
            "broken.example:5000",
            MSG_FAILED.format(registry="broken.example:5000", error="ApiError: 0 Unreachable: connection refused"),
            [],
        ),
        (registry.hostname, "", [f"{DEMO_REPO}@{pushed['orphan'].digest}", f"{OTHER_REPO}@{pushed['other'].digest}"]),
    ]


async def test_a_leader_that_loses_the_lease_mid_reclamation_sends_no_further_delete(
    registry: RegistryServer, pushed: dict, cache, kube: Kube, counting: Counting
) -> None:
    """Losing the Lease cancels the loops a few event-loop turns later; the reclaimer itself must not
    send another DELETE once the loss is known, since a new leader may already be acting."""
    from policies.config import PolicyConfig
    from policies.sidecar_config import SidecarConfig
    from tests.sidecar.conftest import counting_factory
    from webhook.sidecar.runner import Sidecar, SidecarSettings

    config = SidecarConfig.model_validate(
        {
            "referencedSet": {"namespace": WARDEN_NS},
            "reclaim": {"safetyAge": "0s", "maxRemovalShare": 1.0},
            "packages": {"enabled": False},
        }
    )
    sidecar = Sidecar(
        kube,
        PolicyConfig(sidecar=config),
        SidecarSettings(namespace=WARDEN_NS, identity="pod-a"),
        cache=cache,
        client_factory=counting_factory(counting),
    )

    def lease_lost_after_first_delete(request: httpx.Request, response: httpx.Response) -> None:
        if request.method == "DELETE":
            sidecar._stopped_leading()

    counting.after = lease_lost_after_first_delete
    sidecar._started_leading()
    await sidecar.pass_once(T0)
    assert [p for m, p in counting.requests if m == "DELETE"] == [
        f"/v2/{DEMO_REPO}/manifests/{pushed['orphan'].digest}"
    ]
    with registry.http() as http:
        assert http.get(f"/v2/{OTHER_REPO}/tags/list").json()["tags"] == ["3.0.0"]

    counting.clear()
    await sidecar.pass_once(T0 + timedelta(minutes=5))  # a follower's pass (were one to run) removes nothing
    assert [m for m, _ in counting.requests if m == "DELETE"] == []
    await sidecar.clients.aclose()
