"""The chart indexer against a real docker-registry, the apiserver double and an informer cache.

Seed 004's economics are asserted by counting every request the indexer's registry client sends:
a steady pass is exactly one tag listing and no API write; a new tag is 1 + 1.
"""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from policies.chart_index import FORCE_RECONCILE_ANNOTATION as FORCE
from policies.chart_index import MSG_NO_LAYER, MSG_REMOVED
from policies.chart_repository_status import MSG_PARTIAL, MSG_SYNCED
from policies.charts_naming import helm_cluster_addon_chart_name
from policies.kinds import (
    HELM_CLUSTER_ADDON,
    HELM_CLUSTER_ADDON_CHART,
    HELM_CLUSTER_ADDON_REPOSITORY,
    REGISTRY,
)
from policies.objects import format_time, ref_of
from policies.sidecar_config import ChartIndexConfig
from tests.registry.scripted_server import ScriptedServer
from tests.sidecar.conftest import SOLAR, T0, WARDEN_NS, Counting, Writes, counting_factory, secret_reader
from tests.support.registry import RegistryServer, push_artifact, push_helm_chart
from tests.support.server import wait_until
from webhook.kube.cache import InformerCache
from webhook.kube.client import Conflict, Kube
from webhook.kube.writes import Writer
from webhook.sidecar.chart_index import ChartIndexer, IndexReport
from webhook.sidecar.clients import RegistryClients

pytestmark = pytest.mark.anyio

HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
CONTENT = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
LEGACY = "application/tar+gzip"
UNKNOWN = "application/vnd.example.unknown.v1"
REPO = "podinfo-repo"
CHART = "podinfo"
BASE = "charts"
REPOSITORY = f"{BASE}/{CHART}"
CHART_OBJECT = helm_cluster_addon_chart_name(REPO, CHART)
KINDS = (REGISTRY, HELM_CLUSTER_ADDON_REPOSITORY, HELM_CLUSTER_ADDON_CHART, HELM_CLUSTER_ADDON)
HELM = "helm.deckhouse.io/v1alpha1"


def chart_tgz(version: str) -> bytes:
    buffer = io.BytesIO()
    data = f"apiVersion: v2\nname: {CHART}\nversion: {version}\n".encode()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"{CHART}/Chart.yaml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def push(http: httpx.Client, version: str, layer: str) -> str:
    """A chart version with the given layer media type (helm config always); returns its digest."""
    config = json.dumps({"apiVersion": "v2", "name": CHART, "version": version}).encode()
    return push_artifact(http, REPOSITORY, version, HELM_CONFIG, config, [(layer, chart_tgz(version), {})]).digest


@pytest.fixture
def helm_cache(kube: Kube) -> Iterator[InformerCache]:
    c = InformerCache(kube, KINDS).start()
    assert c.wait_synced(10), "informer cache did not sync"
    yield c
    c.stop()


@pytest.fixture
def http(registry: RegistryServer) -> Iterator[httpx.Client]:
    with registry.http() as client:
        yield client


@pytest.fixture
def indexer(helm_cache: InformerCache, kube: Kube, counting: Counting) -> ChartIndexer:
    clients = RegistryClients(helm_cache, secret_reader(kube), counting_factory(counting))
    return ChartIndexer(helm_cache, kube, Writer(kube), clients, ChartIndexConfig(), namespace=WARDEN_NS)


@pytest.fixture
def repository(admin: Kube, registry: RegistryServer, helm_cache: InformerCache) -> dict[str, Any]:
    """The Deckhouse repository, and a SolAr Registry (in the warden's namespace, the only one the chart
    index takes a Registry from) saying the test registry speaks plain HTTP."""
    admin.create(
        REGISTRY,
        {
            "apiVersion": SOLAR,
            "kind": "Registry",
            "metadata": {"name": "local", "namespace": WARDEN_NS},
            "spec": {"hostname": registry.hostname, "plainHTTP": True},
        },
    )
    repo = admin.create(
        HELM_CLUSTER_ADDON_REPOSITORY,
        {
            "apiVersion": HELM,
            "kind": "HelmClusterAddonRepository",
            "metadata": {"name": REPO},
            "spec": {"url": f"oci://{registry.hostname}/{REPOSITORY}"},
        },
    )
    settle(admin, helm_cache)
    return repo


def settle(admin: Kube, cache: InformerCache) -> None:
    def same() -> bool:
        for kind in KINDS:
            api = {ref_of(o): o["metadata"]["resourceVersion"] for o in admin.list(kind)["items"]}
            if api != {ref_of(o): o["metadata"]["resourceVersion"] for o in cache.list(kind)}:
                return False
        return True

    wait_until(same, timeout=10, what="the informer cache to catch up with the apiserver")


def versions(admin: Kube) -> list[dict[str, Any]]:
    return admin.get(HELM_CLUSTER_ADDON_CHART, CHART_OBJECT)["status"]["versions"]


async def index(indexer: ChartIndexer, admin: Kube, cache: InformerCache) -> IndexReport:
    report = await indexer.run_once(T0)
    settle(admin, cache)
    return report


TAGS_LIST = ("GET", f"/v2/{REPOSITORY}/tags/list")


def manifest_get(tag: str) -> tuple[str, str]:
    return ("GET", f"/v2/{REPOSITORY}/manifests/{tag}")


async def test_legacy_and_helm_layers_usable_unknown_unsupported_then_steady_then_one_new_tag(
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
    counting: Counting,
    writes: Writes,
) -> None:
    legacy = push(http, "1.0.0", LEGACY)
    modern = push(http, "1.1.0", CONTENT)
    push(http, "1.2.0", UNKNOWN)
    push(http, "latest", CONTENT)  # not a version: never examined
    writes.clear()

    await index(indexer, admin, helm_cache)

    assert sorted(counting.requests) == sorted(
        [TAGS_LIST, manifest_get("1.0.0"), manifest_get("1.1.0"), manifest_get("1.2.0")]
    )
    assert versions(admin) == [
        {
            "version": "1.2.0",
            "unavailableReason": "UnsupportedMediaType",
            "unavailableMessage": MSG_NO_LAYER.format(layers=UNKNOWN),
        },
        {"version": "1.1.0", "digest": modern, "mediaType": CONTENT},
        {"version": "1.0.0", "digest": legacy, "mediaType": LEGACY},
    ]
    chart = admin.get(HELM_CLUSTER_ADDON_CHART, CHART_OBJECT)
    assert chart["metadata"]["labels"] == {"repository": REPO, "chart": CHART}
    assert [(o["kind"], o["name"], o["uid"]) for o in chart["metadata"]["ownerReferences"]] == [
        ("HelmClusterAddonRepository", REPO, repository["metadata"]["uid"])
    ]

    # steady: one tag listing, nothing written
    counting.clear()
    writes.clear()
    await index(indexer, admin, helm_cache)
    assert counting.requests == [TAGS_LIST]
    assert writes.calls == []

    # one new tag: 1 + 1 requests and one status write
    counting.clear()
    newest = push(http, "1.3.0", CONTENT)
    counting.clear()
    writes.clear()
    await index(indexer, admin, helm_cache)
    assert counting.requests == [TAGS_LIST, manifest_get("1.3.0")]
    assert writes.calls == [("patch", "helmclusteraddoncharts", CHART_OBJECT, "status")]
    assert versions(admin)[0] == {"version": "1.3.0", "digest": newest, "mediaType": CONTENT}


async def test_deleted_tag_kept_while_last_applied_references_it(
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
    registry: RegistryServer,
) -> None:
    legacy = push(http, "1.0.0", LEGACY)
    modern = push(http, "1.1.0", CONTENT)
    dropped = push(http, "0.9.0", CONTENT)
    await index(indexer, admin, helm_cache)
    ref = {"helmClusterAddonRepository": REPO, "helmClusterAddonChart": CHART}
    admin.create(
        HELM_CLUSTER_ADDON,
        {
            "apiVersion": HELM,
            "kind": "HelmClusterAddon",
            "metadata": {"name": "web"},
            "spec": {"chart": {**ref, "version": "1.1.0"}},
        },
    )
    admin.patch(
        HELM_CLUSTER_ADDON,
        "web",
        "",
        {"status": {"lastAppliedChart": {**ref, "version": "1.0.0"}}},
        subresource="status",
    )
    for digest in (legacy, dropped):
        assert http.delete(f"/v2/{REPOSITORY}/manifests/{digest}").status_code == 202
    settle(admin, helm_cache)

    await index(indexer, admin, helm_cache)

    assert versions(admin) == [
        {"version": "1.1.0", "digest": modern, "mediaType": CONTENT},
        {
            "version": "1.0.0",
            "digest": legacy,
            "mediaType": LEGACY,
            "unavailableReason": "RemovedFromRepository",
            "unavailableMessage": MSG_REMOVED.format(tag="1.0.0"),
        },
    ]


def fail_manifests(counting: Counting, status: int) -> None:
    def rewrite(request: httpx.Request) -> httpx.Response | None:
        if "/manifests/" in request.url.path:
            return httpx.Response(status, json={"errors": [{"code": "UNAVAILABLE", "message": "try later"}]})
        return None

    counting.rewrite = rewrite


async def test_registry_errors_never_give_a_negative_verdict(
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
    counting: Counting,
    writes: Writes,
) -> None:
    known = push(http, "1.0.0", CONTENT)
    await index(indexer, admin, helm_cache)
    push(http, "1.1.0", CONTENT)
    # a forced pass re-examines everything; every manifest request now answers 503
    admin.patch(
        HELM_CLUSTER_ADDON_REPOSITORY,
        REPO,
        "",
        {"metadata": {"annotations": {"reconcile.helm.deckhouse.io/force": "now"}}},
    )
    settle(admin, helm_cache)
    fail_manifests(counting, 503)
    counting.clear()

    await index(indexer, admin, helm_cache)

    assert sorted(counting.requests) == sorted([TAGS_LIST, manifest_get("1.0.0"), manifest_get("1.1.0")])
    entries = versions(admin)
    assert entries[1] == {"version": "1.0.0", "digest": known, "mediaType": CONTENT}
    assert entries[0]["version"] == "1.1.0"
    assert entries[0]["unavailableReason"] == "ResolvePending"
    assert entries[0]["unavailableMessage"].startswith("manifest request failed: ")
    assert "503" in entries[0]["unavailableMessage"]
    assert "reconcile.helm.deckhouse.io/force" not in (
        admin.get(HELM_CLUSTER_ADDON_REPOSITORY, REPO)["metadata"].get("annotations") or {}
    )

    # the pending tag is asked again on the next normal pass, and resolves once the registry answers
    counting.rewrite = None
    counting.clear()
    await index(indexer, admin, helm_cache)
    assert counting.requests == [TAGS_LIST, manifest_get("1.1.0")]
    assert versions(admin)[0]["mediaType"] == CONTENT

    # a failed tag listing writes no verdict: only the repository's status counts the failure
    def down(request: httpx.Request) -> httpx.Response | None:
        return httpx.Response(503, json={"errors": [{"code": "UNAVAILABLE", "message": "down"}]})

    counting.rewrite = down
    writes.clear()
    before = versions(admin)
    report = await index(indexer, admin, helm_cache)
    assert writes.calls == [("patch", "helmclusteraddonrepositories", REPO, "status")]
    assert versions(admin) == before
    assert admin.get(HELM_CLUSTER_ADDON_REPOSITORY, REPO)["status"]["consecutiveFetchFailures"] == 1
    assert report.repositories[REPO].error.startswith("UnexpectedStatus: ")


async def test_helm_chart_pushed_by_the_fixture_is_usable(
    indexer: ChartIndexer, repository: dict[str, Any], admin: Kube, helm_cache: InformerCache, http: httpx.Client
) -> None:
    pushed = push_helm_chart(http, BASE, CHART, "2.0.0+build.1")
    await index(indexer, admin, helm_cache)
    assert versions(admin) == [{"version": "2.0.0+build.1", "digest": pushed.digest, "mediaType": CONTENT}]


async def test_one_broken_repository_does_not_stop_the_others(
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
) -> None:
    # passes the CRD's CEL rule (^(https?|oci)://.+$) but not urlsplit; sorts before the good repository,
    # so a crash on it would stop the pass before the good one is indexed
    broken = {"url": "oci://[broken/chart"}
    admin.create(
        HELM_CLUSTER_ADDON_REPOSITORY,
        {"apiVersion": HELM, "kind": "HelmClusterAddonRepository", "metadata": {"name": "a-broken"}, "spec": broken},
    )
    settle(admin, helm_cache)
    pushed = push(http, "1.0.0", CONTENT)

    report = await index(indexer, admin, helm_cache)

    assert versions(admin) == [{"version": "1.0.0", "digest": pushed, "mediaType": CONTENT}]
    assert report.repositories["a-broken"].error == "ValueError: Invalid IPv6 URL"
    assert report.repositories[REPO].error == ""


async def test_force_is_kept_when_the_forced_verdicts_could_not_be_written(
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
    counting: Counting,
) -> None:
    push(http, "1.0.0", CONTENT)
    await index(indexer, admin, helm_cache)
    force = "reconcile.helm.deckhouse.io/force"
    admin.patch(HELM_CLUSTER_ADDON_REPOSITORY, REPO, "", {"metadata": {"annotations": {force: "now"}}})
    settle(admin, helm_cache)

    def stale(*args: Any, **kwargs: Any) -> None:
        raise Conflict(409, "Conflict", "the object has been modified")

    # the forced pass re-examines every tag, but its status write meets a newer chart object
    indexer.writer.patch_status = stale  # type: ignore[method-assign]
    counting.clear()
    report = await index(indexer, admin, helm_cache)
    assert counting.requests == [TAGS_LIST, manifest_get("1.0.0")]
    assert report.repositories[REPO].written is False
    annotations = admin.get(HELM_CLUSTER_ADDON_REPOSITORY, REPO)["metadata"].get("annotations") or {}
    assert force in annotations, "a forced pass whose verdicts were not written must not consume the request"

    # the next pass is still a full one; once written, the request is consumed
    del indexer.writer.patch_status
    counting.clear()
    await index(indexer, admin, helm_cache)
    assert counting.requests == [TAGS_LIST, manifest_get("1.0.0")]
    assert force not in (admin.get(HELM_CLUSTER_ADDON_REPOSITORY, REPO)["metadata"].get("annotations") or {})


async def test_forbidden_manifest_stops_the_repository_without_requests_left_running(
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
    counting: Counting,
    writes: Writes,
) -> None:
    for version in ("1.0.0", "1.1.0", "1.2.0"):
        push(http, version, CONTENT)
    indexer.config = ChartIndexConfig(concurrency=1)
    fail_manifests(counting, 403)
    counting.clear()
    writes.clear()
    before = asyncio.all_tasks()

    report = await indexer.run_once(T0)

    # 401/403 is terminal for the repository: the other tags' requests are not left running behind the pass
    left = [t for t in asyncio.all_tasks() - before if not t.done()]
    assert left == []
    assert counting.requests == [TAGS_LIST, manifest_get("1.0.0")]
    assert report.repositories[REPO].error.startswith("RepositoryDenied: ")
    # no verdict is written; the repository's status counts a failed fetch
    assert writes.calls == [("patch", "helmclusteraddonrepositories", REPO, "status")]


def repository_status(admin: Kube) -> dict[str, Any]:
    return admin.get(HELM_CLUSTER_ADDON_REPOSITORY, REPO).get("status") or {}


async def test_repository_status_partial_then_full_then_forced(
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
    counting: Counting,
    writes: Writes,
) -> None:
    push(http, "1.0.0", CONTENT)
    push(http, "1.1.0", CONTENT)

    def flaky(request: httpx.Request) -> httpx.Response | None:
        if request.url.path.endswith("/manifests/1.1.0"):
            return httpx.Response(503, json={"errors": [{"code": "UNAVAILABLE", "message": "try later"}]})
        return None

    # the first pass leaves one tag pending: no full pass has ever happened, so PartialSync
    counting.rewrite = flaky
    await indexer.run_once(T0)
    settle(admin, helm_cache)
    partial = {
        "chartCount": 1,
        "consecutiveFetchFailures": 0,
        "conditions": [
            {
                "type": "Synced",
                "status": "False",
                "reason": "PartialSync",
                "message": MSG_PARTIAL.format(pending=1),
                "lastTransitionTime": format_time(T0),
            }
        ],
    }
    assert repository_status(admin) == partial

    # the same partial outcome later changes nothing, so nothing is written to the repository
    writes.clear()
    await indexer.run_once(T0 + timedelta(minutes=5))
    settle(admin, helm_cache)
    assert writes.of("helmclusteraddonrepositories") == []
    assert repository_status(admin) == partial

    # the registry answers: a full pass sets the time and Synced=True
    counting.rewrite = None
    t2 = T0 + timedelta(minutes=10)
    await indexer.run_once(t2)
    settle(admin, helm_cache)
    synced = {
        "type": "Synced",
        "status": "True",
        "reason": "Synced",
        "message": MSG_SYNCED,
        "lastTransitionTime": format_time(t2),
    }
    assert repository_status(admin) == {
        "chartCount": 1,
        "consecutiveFetchFailures": 0,
        "lastSuccessfulSyncTime": format_time(t2),
        "conditions": [synced],
    }

    # a forced pass is recorded, and its annotation is removed
    force = "reconcile.helm.deckhouse.io/force"
    admin.patch(HELM_CLUSTER_ADDON_REPOSITORY, REPO, "", {"metadata": {"annotations": {force: "now"}}})
    settle(admin, helm_cache)
    t3 = T0 + timedelta(minutes=15)
    await indexer.run_once(t3)
    settle(admin, helm_cache)
    assert repository_status(admin) == {
        "chartCount": 1,
        "consecutiveFetchFailures": 0,
        "lastSuccessfulSyncTime": format_time(t3),
        "lastForceReconcileTime": format_time(t3),
        "conditions": [synced],
    }
    assert force not in (admin.get(HELM_CLUSTER_ADDON_REPOSITORY, REPO)["metadata"].get("annotations") or {})


# --- seed 004's upgrade window: a chart object written by the pre-upgrade module ------------------

OLD_NAME = f"{REPO}-{CHART}"
"""The older ``<repo>-<chart>`` naming scheme (B5): not the name the index derives today."""


def pre_upgrade_chart(admin: Kube, repo: dict[str, Any], name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """A chart object as operator-helm @7c1f84f leaves it: its labels, its owner, {version, digest, pulled}."""
    owner = {
        "apiVersion": HELM,
        "kind": "HelmClusterAddonRepository",
        "name": REPO,
        "uid": repo["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    body = {
        "apiVersion": HELM,
        "kind": "HelmClusterAddonChart",
        "metadata": {
            "name": name,
            "labels": {"heritage": "deckhouse", "repository": REPO, "chart": CHART},
            "ownerReferences": [owner],
        },
    }
    created = admin.create(HELM_CLUSTER_ADDON_CHART, body)
    return Writer(admin).patch_status(HELM_CLUSTER_ADDON_CHART, created, {"versions": entries}) or created


@pytest.mark.parametrize("name", [CHART_OBJECT, OLD_NAME])
async def test_pre_upgrade_entries_are_examined_again_without_a_force_reconcile(
    name: str,
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
    counting: Counting,
    writes: Writes,
) -> None:
    """Entries with no verdict (no mediaType, no reason) are examined by the next normal pass, into the
    object the module created whatever its name; no second chart object appears, no force is needed."""
    legacy = push(http, "1.0.0", LEGACY)
    modern = push(http, "1.1.0", CONTENT)
    pre_upgrade_chart(
        admin,
        repository,
        name,
        [
            {"version": "1.1.0", "digest": modern, "pulled": True},
            {"version": "1.0.0", "digest": legacy, "pulled": False},
        ],
    )
    settle(admin, helm_cache)
    counting.clear()
    writes.clear()

    report = await index(indexer, admin, helm_cache)

    assert report.repositories[REPO].error == ""
    assert sorted(counting.requests) == sorted([TAGS_LIST, manifest_get("1.0.0"), manifest_get("1.1.0")])
    assert [o["metadata"]["name"] for o in admin.list(HELM_CLUSTER_ADDON_CHART)["items"]] == [name]
    assert not report.repositories[REPO].created
    assert admin.get(HELM_CLUSTER_ADDON_CHART, name)["status"]["versions"] == [
        {"version": "1.1.0", "digest": modern, "mediaType": CONTENT},
        {"version": "1.0.0", "digest": legacy, "mediaType": LEGACY},
    ]
    assert FORCE not in (admin.get(HELM_CLUSTER_ADDON_REPOSITORY, REPO)["metadata"].get("annotations") or {})

    # and then steady: the verdicts are known now
    counting.clear()
    writes.clear()
    await index(indexer, admin, helm_cache)
    assert counting.requests == [TAGS_LIST]
    assert writes.calls == []


async def test_created_chart_object_carries_the_labels_the_lookup_uses(
    indexer: ChartIndexer,
    repository: dict[str, Any],
    admin: Kube,
    helm_cache: InformerCache,
    http: httpx.Client,
) -> None:
    """Created once, then found again by its labels (not recreated) on the next pass with a new tag."""
    push(http, "1.0.0", CONTENT)
    first = await index(indexer, admin, helm_cache)
    assert first.repositories[REPO].created
    (chart,) = admin.list(HELM_CLUSTER_ADDON_CHART)["items"]
    assert chart["metadata"]["labels"] == {"repository": REPO, "chart": CHART}
    assert chart["apiVersion"] == HELM
    push(http, "1.1.0", CONTENT)
    second = await index(indexer, admin, helm_cache)
    assert not second.repositories[REPO].created
    assert [v["version"] for v in versions(admin)] == ["1.1.0", "1.0.0"]


# --- a Helm HTTP repository whose index points at oci:// (B2 ociRef, InvalidChartReference) --------

HTTP_REPO = "http-charts"
HTTP_INDEX = """
apiVersion: v1
entries:
  podinfo:
    - version: 6.6.0
      icon: https://charts.example.com/podinfo.png
      urls: [oci://ghcr.io/stefanprodan/charts/podinfo]
    - version: 6.5.0
      urls: [oci://ghcr.io/stefanprodan/charts/podinfo@sha256:0f]
    - version: 6.4.0
      urls: [podinfo-6.4.0.tgz]
  nginx:
    - version: 1.0.0
      urls: [https://charts.example.com/nginx-1.0.0.tgz]
"""


@pytest.fixture
def index_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    yield server
    server.stop()


async def test_http_repository_index_records_oci_refs_and_invalid_references(
    indexer: ChartIndexer, admin: Kube, helm_cache: InformerCache, index_server: ScriptedServer, writes: Writes
) -> None:
    index_server.route(
        "GET", "/charts/index.yaml", lambda seen: (200, {"Content-Type": "text/yaml"}, HTTP_INDEX.encode())
    )
    admin.create(
        HELM_CLUSTER_ADDON_REPOSITORY,
        {
            "apiVersion": HELM,
            "kind": "HelmClusterAddonRepository",
            "metadata": {"name": HTTP_REPO},
            "spec": {"url": f"{index_server.base_url}/charts/"},
        },
    )
    settle(admin, helm_cache)

    report = await index(indexer, admin, helm_cache)

    assert report.repositories[HTTP_REPO].error == ""
    assert [s.path for s in index_server.seen] == ["/charts/index.yaml"]  # one request for the whole index
    by_chart = {o["metadata"]["labels"]["chart"]: o for o in admin.list(HELM_CLUSTER_ADDON_CHART)["items"]}
    assert sorted(by_chart) == ["nginx", "podinfo"]
    podinfo = by_chart["podinfo"]
    assert podinfo["metadata"]["name"] == helm_cluster_addon_chart_name(HTTP_REPO, "podinfo")
    assert podinfo["metadata"]["labels"] == {"repository": HTTP_REPO, "chart": "podinfo"}
    assert podinfo["status"]["iconURL"] == "https://charts.example.com/podinfo.png"
    assert podinfo["status"]["versions"] == [
        {"version": "6.6.0", "ociRef": "oci://ghcr.io/stefanprodan/charts/podinfo:6.6.0"},
        {
            "version": "6.5.0",
            "unavailableReason": "InvalidChartReference",
            "unavailableMessage": 'oci reference "oci://ghcr.io/stefanprodan/charts/podinfo@sha256:0f" addresses a '
            "digest, which cannot be expressed as a chart version tag",
        },
        {"version": "6.4.0"},
    ]
    assert by_chart["nginx"]["status"]["versions"] == [{"version": "1.0.0"}]
    assert admin.get(HELM_CLUSTER_ADDON_REPOSITORY, HTTP_REPO)["status"]["chartCount"] == 2

    # steady: the index again, nothing written
    writes.clear()
    index_server.seen.clear()
    await index(indexer, admin, helm_cache)
    assert [s.path for s in index_server.seen] == ["/charts/index.yaml"]
    assert writes.calls == []


async def test_http_index_that_cannot_be_read_writes_no_chart(
    indexer: ChartIndexer, admin: Kube, helm_cache: InformerCache, index_server: ScriptedServer
) -> None:
    index_server.route("GET", "/index.yaml", lambda seen: (200, {}, b"entries: [unclosed"))
    admin.create(
        HELM_CLUSTER_ADDON_REPOSITORY,
        {
            "apiVersion": HELM,
            "kind": "HelmClusterAddonRepository",
            "metadata": {"name": HTTP_REPO},
            "spec": {"url": index_server.base_url},
        },
    )
    settle(admin, helm_cache)
    report = await index(indexer, admin, helm_cache)
    assert report.repositories[HTTP_REPO].error.startswith(
        f"IndexFetchError: GET {index_server.base_url}/index.yaml: not YAML:"
    )
    assert admin.list(HELM_CLUSTER_ADDON_CHART)["items"] == []
