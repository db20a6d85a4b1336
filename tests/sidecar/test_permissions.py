"""The sidecar's RBAC is enough for what it does, and the base grants no Secret read and no delete.

The apiserver double authorizes nothing, but it records every request and who sent it. A wired
sidecar (leader election, availability with a registry Secret, the retention janitor, the referenced
set) runs one pass as the warden's service account against the objects the manifests ship, and a
forced chart index pass runs as that account too; then each request they sent is judged by the
manifests' RBAC (tests/support/rbac.py), as kube-apiserver would have judged it. The package
bookkeeping is not run here (its writes are patches the static tests cover).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from policies.availability import AVAILABLE
from policies.config import PolicyConfig
from policies.kinds import COMPONENT_VERSION, CONFIG_MAP, HELM_CLUSTER_ADDON_REPOSITORY, REGISTRY, SECRET
from policies.model import GroupKind, Obj
from policies.referenced_set import CONFIGMAP_KEY
from policies.sidecar_config import ChartIndexConfig, ReferencedSetConfig, SidecarConfig
from tests.core.test_manifests import SIDECAR, component, named, rbac
from tests.sidecar.conftest import NS, SOLAR, T0, WARDEN, WARDEN_NS, Counting, World, counting_factory, secret_reader
from tests.sidecar.test_chart_index import CONTENT, HELM, KINDS, REPO, REPOSITORY
from tests.sidecar.test_chart_index import push as push_chart
from tests.sidecar.test_chart_index import settle as chart_settle
from tests.sidecar.test_runner import reason, until
from tests.support.apiserver import ApiServerDouble
from tests.support.rbac import Attributes, attributes
from tests.support.registry import TEST_PASSWORD, TEST_USER, RegistryServer, free_port, push_ocm_component
from webhook.kube.cache import InformerCache
from webhook.kube.client import ApiError, Kube, NotFound
from webhook.kube.leader import LeaseTiming
from webhook.kube.writes import Writer
from webhook.sidecar.chart_index import ChartIndexer
from webhook.sidecar.clients import RegistryClients, default_factory
from webhook.sidecar.runner import Sidecar, SidecarSettings

pytestmark = pytest.mark.anyio

FORCE = "reconcile.helm.deckhouse.io/force"
RED_SINCE = "2026-11-21T12:00:00Z"  # 8 days before T0: past the janitor's default minRedAge
REFERENCED_SET = ReferencedSetConfig().configMap


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[RegistryServer]:
    with RegistryServer(tmp_path / "registry", auth="basic") as server:
        yield server


def shipped_configmap(admin: Kube) -> None:
    """What `kubectl apply -k manifests` creates before the sidecar starts: the empty referenced set."""
    admin.create(CONFIG_MAP, named("ConfigMap", REFERENCED_SET))


def published(admin: Kube) -> bool:
    return CONFIGMAP_KEY in (admin.get(CONFIG_MAP, REFERENCED_SET, WARDEN_NS).get("data") or {})


def gone(admin: Kube, name: str) -> bool:
    try:
        admin.get(COMPONENT_VERSION, name, NS)
    except NotFound:
        return True
    return False


async def test_every_request_of_a_sidecar_pass_is_allowed_by_the_manifests(
    registry: RegistryServer,
    world: World,
    admin: Kube,
    kube: Kube,
    counting: Counting,
    apiserver: ApiServerDouble,
) -> None:
    assert WARDEN == SIDECAR
    shipped_configmap(admin)
    with registry.http() as http:
        push_ocm_component(http, "ocm", "example.com/demo", "1.0.0")
    world.secret("creds", TEST_USER, TEST_PASSWORD)
    world.registry("reg", registry.hostname, secret="creds")
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo")
    world.version("one", "example-com-demo", "1.0.0")
    world.version("old", "example-com-demo", "0.9.0")
    red = {"type": AVAILABLE, "status": "False", "reason": "ArtifactMissing", "message": "m"}
    missing = {"consecutiveMisses": 9, "firstMissAt": RED_SINCE}  # a further 404 keeps it red
    world.patch_status("old", {"conditions": [{**red, "lastTransitionTime": RED_SINCE}], "availability": missing})
    config = PolicyConfig(
        sidecar=SidecarConfig.model_validate(
            {
                # Passes every second: a delete that lost a race with the cache is simply retried.
                "availability": {"interval": "1s"},
                "referencedSet": {"namespace": WARDEN_NS},
                "retention": {"enabled": True, "keepLast": 0, "interval": "1s"},
            }
        )
    )
    ticks = iter(range(10_000))
    sidecar = Sidecar(
        kube,
        config,
        SidecarSettings(namespace=WARDEN_NS, identity="pod-a", events_host="127.0.0.1", events_port=free_port()),
        clock=lambda: T0 + timedelta(seconds=next(ticks)),
        client_factory=counting_factory(counting),
        lease_timing=LeaseTiming(lease_duration=3, renew_deadline=2.0, retry_period=0.5),
    )
    task = asyncio.create_task(sidecar.run())
    try:
        await until(
            lambda: reason(world, "one") == "ArtifactResolved", "the credentials to resolve the artifact", timeout=60
        )
        await until(lambda: gone(admin, "old"), "the janitor's delete", timeout=60)
        await until(lambda: published(admin), "the referenced set", timeout=60)
    finally:
        sidecar.stop()
        await asyncio.wait_for(task, 30)

    sent = [attributes(r.method, r.path, r.params) for r in apiserver.requests if r.user == WARDEN]
    full = rbac("janitor", "registry-secrets")
    assert [str(a) for a in sent if not full.allows(SIDECAR, a)] == []
    # What only the components grant, and the pass did use: a Secret in a listed namespace, the delete.
    secret = Attributes("get", "", "secrets", NS, "creds")
    delete = Attributes("delete", "solar.opendefense.cloud", "componentversions", NS, "old")
    assert {secret, delete} <= set(sent)
    assert {str(a) for a in sent if not rbac().allows(SIDECAR, a)} == {str(secret), str(delete)}
    assert NS in {d["metadata"]["namespace"] for d in component("registry-secrets")}
    assert not any(a.verb == "create" and a.resource == "configmaps" for a in sent)


class NoSecrets(Kube):
    """The warden's connection where no RoleBinding lets it read Secrets: kube-apiserver answers 403."""

    def get(self, kind: GroupKind, name: str, namespace: str = "", timeout: float | None = None) -> Obj:
        if kind == SECRET:
            message = f'secrets "{name}" is forbidden: User "{WARDEN}" cannot get resource "secrets" in the namespace'
            raise ApiError(403, "Forbidden", message)
        return super().get(kind, name, namespace, timeout)


async def test_a_registry_secret_the_sidecar_may_not_read_means_an_anonymous_check(
    registry: RegistryServer, world: World, apiserver: ApiServerDouble, admin: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    with registry.http() as http:
        push_ocm_component(http, "ocm", "example.com/demo", "1.0.0")
    world.secret("creds", TEST_USER, TEST_PASSWORD)
    world.registry("reg", registry.hostname, secret="creds")
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo")
    world.version("one", "example-com-demo", "1.0.0")
    settings = SidecarSettings(namespace=WARDEN_NS, identity="pod-a", events_host="127.0.0.1", events_port=free_port())
    sidecar = Sidecar(NoSecrets(apiserver.api_client(WARDEN)), PolicyConfig(), settings)
    sidecar.cache.start()
    try:
        assert sidecar.cache.wait_synced(10)
        await sidecar.pass_once(T0)  # does not raise: the pass goes on without the Secret
    finally:
        sidecar.cache.stop()
        await sidecar.clients.aclose()
    condition = world.get("one")["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("Unknown", "CheckFailed")
    assert "401" in condition["message"]
    (record,) = [r for r in caplog.records if r.getMessage() == "registry secret not readable"]
    assert record.fields == {  # type: ignore[attr-defined]
        "secret": f"{NS}/creds",
        "error": f'403 Forbidden: secrets "creds" is forbidden: User "{WARDEN}" cannot get resource "secrets" '
        "in the namespace",
        "fix": f"bind the ClusterRole catalog-warden-registry-secrets in namespace {NS} "
        "(manifests/components/registry-secrets)",
    }


async def test_every_request_of_a_forced_chart_index_pass_is_allowed_by_the_manifests(
    registry: RegistryServer, world: World, admin: Kube, kube: Kube, apiserver: ApiServerDouble
) -> None:
    """The chart index writes chart objects, their status, the repository's status and annotation."""
    with registry.http() as http:
        push_chart(http, "1.0.0", CONTENT)
    world.secret("creds", TEST_USER, TEST_PASSWORD, namespace=WARDEN_NS)  # the chart index lends only the warden's
    admin.create(
        REGISTRY,
        {
            "apiVersion": SOLAR,
            "kind": "Registry",
            "metadata": {"name": "local", "namespace": WARDEN_NS},
            "spec": {"hostname": registry.hostname, "plainHTTP": True, "solarSecretRef": {"name": "creds"}},
        },
    )
    repository = {
        "apiVersion": HELM,
        "kind": "HelmClusterAddonRepository",
        "metadata": {"name": REPO, "annotations": {FORCE: "now"}},
        "spec": {"url": f"oci://{registry.hostname}/{REPOSITORY}"},
    }
    admin.create(HELM_CLUSTER_ADDON_REPOSITORY, repository)
    cache = InformerCache(kube, KINDS).start()
    clients = RegistryClients(cache, secret_reader(kube), default_factory)
    try:
        assert cache.wait_synced(10)
        chart_settle(admin, cache)
        before = len(apiserver.requests)
        report = await ChartIndexer(
            cache, kube, Writer(kube), clients, ChartIndexConfig(), namespace=WARDEN_NS
        ).run_once(T0)
    finally:
        await clients.aclose()
        cache.stop()
    assert report.repositories[REPO].error == ""
    repo = admin.get(HELM_CLUSTER_ADDON_REPOSITORY, REPO)
    assert FORCE not in (repo["metadata"].get("annotations") or {}) and repo.get("status")
    sent = [attributes(r.method, r.path, r.params) for r in apiserver.requests[before:] if r.user == WARDEN]
    assert {
        ("create", "helmclusteraddoncharts"),
        ("patch", "helmclusteraddoncharts/status"),
        ("patch", "helmclusteraddonrepositories/status"),
        ("patch", "helmclusteraddonrepositories"),
        ("get", "secrets"),
    } <= {(a.verb, a.resource) for a in sent}
    assert [str(a) for a in sent if not rbac("registry-secrets").allows(SIDECAR, a)] == []
