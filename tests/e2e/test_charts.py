"""Chart catalog end to end (issue 5): module-only chart edits, deployable versions, repository in use.

The resources are cluster-scoped, so every object name carries the test's own name.
"""

from __future__ import annotations

from typing import Any

from policies.charts import (
    MSG_FORBIDDEN,
    MSG_INVALID_REFERENCE,
    MSG_REPOSITORY_IN_USE,
    MSG_VERSION_UNRESOLVED,
    MSG_VERSION_UNUSABLE,
)
from policies.charts_naming import helm_cluster_addon_chart_name
from tests.e2e.conftest import KUBE_SYSTEM_SA, Cluster, Refusal, Resource, denied, refused
from tests.support.stack import WARDEN

HELM = "helm.deckhouse.io"
REPOSITORY = Resource(HELM, "v1alpha1", "helmclusteraddonrepositories", "HelmClusterAddonRepository", False)
CHART = Resource(HELM, "v1alpha1", "helmclusteraddoncharts", "HelmClusterAddonChart", False)
ADDON = Resource(HELM, "v1alpha1", "helmclusteraddons", "HelmClusterAddon", False)

VALIDATE = "charts.validate.catalog-warden.io"
HELM_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
LEGACY_DETAIL = "layer application/tar+gzip is not a Helm chart layer (legacy chart push)"

VERSIONS = [
    {"version": "1.1.0", "unavailableReason": "UnsupportedMediaType", "unavailableMessage": LEGACY_DETAIL},
    {"version": "1.0.0", "digest": "sha256:" + "a" * 64, "mediaType": HELM_LAYER},
]
"""What the sidecar's chart index records: 1.0.0 deployable, 1.1.0 pushed with a legacy layer."""


def repository(name: str) -> dict[str, Any]:
    return REPOSITORY.manifest(name, spec={"url": f"oci://registry.example.com/charts/{name}"})


def chart(repo: str, chart_name: str) -> dict[str, Any]:
    name = helm_cluster_addon_chart_name(repo, chart_name)
    return CHART.manifest(name, metadata={"labels": {"repository": repo, "chart": chart_name}})


def addon(name: str, repo: str, chart_name: str, version: str) -> dict[str, Any]:
    spec = {"chart": {"helmClusterAddonRepository": repo, "helmClusterAddonChart": chart_name, "version": version}}
    return ADDON.manifest(name, spec=spec)


def indexed_chart(cluster: Cluster, repo: str, chart_name: str) -> str:
    """The chart object as the sidecar writes it (object, then status), once the webhook's cache has it."""
    charts = cluster.warden(CHART)
    name = charts.create(chart(repo, chart_name)).object["metadata"]["name"]
    written = charts.patch_status(name, {"status": {"versions": VERSIONS}}).object
    cluster.stack.wait_caught_up(CHART.group_kind, written)
    return name


def forbidden(name: str) -> str:
    return denied(VALIDATE, "HelmClusterAddonChart", name, "charts.chart-module-only", MSG_FORBIDDEN)


def test_users_cannot_create_charts_nor_edit_their_status(cluster: Cluster, name: str) -> None:
    chart_name = indexed_chart(cluster, name, "podinfo")
    user_charts = cluster.user(CHART)

    status_edit = refused(lambda: user_charts.patch_status(chart_name, {"status": {"versions": []}}))
    creation = refused(lambda: user_charts.create(chart(name, "other")))

    other = helm_cluster_addon_chart_name(name, "other")
    assert status_edit == Refusal(403, forbidden(chart_name))
    assert creation == Refusal(403, forbidden(other))
    assert cluster.warden(CHART).get(chart_name)["status"]["versions"] == VERSIONS
    assert not user_charts.exists(other)


def test_the_sidecar_and_kube_system_service_accounts_write_charts_and_their_status(
    cluster: Cluster, name: str
) -> None:
    for user, chart_name in ((WARDEN, "podinfo"), (KUBE_SYSTEM_SA, "nginx")):
        charts = cluster.as_user(user, CHART)
        created = charts.create(chart(name, chart_name)).object["metadata"]["name"]

        edited = charts.patch_status(created, {"status": {"versions": VERSIONS}})

        assert edited.object["status"]["versions"] == VERSIONS, user
        charts.delete(created)
        assert not charts.exists(created), user


def test_an_addon_cannot_move_to_a_version_with_an_unsupported_media_type(cluster: Cluster, name: str) -> None:
    cluster.user(REPOSITORY).create(repository(name))
    chart_name = indexed_chart(cluster, name, "podinfo")
    addons = cluster.user(ADDON)
    assert addons.create(addon(name, name, "podinfo", "1.0.0")).warnings == []

    refusal = refused(lambda: addons.patch(name, {"spec": {"chart": {"version": "1.1.0"}}}))

    detail = f"UnsupportedMediaType: {LEGACY_DETAIL}"
    message = MSG_VERSION_UNUSABLE.format(chart=chart_name, version="1.1.0", detail=detail, repository=name)
    assert refusal == Refusal(
        403, denied(VALIDATE, "HelmClusterAddon", name, "charts.addon-deployable-version", message)
    )
    assert addons.get(name)["spec"]["chart"]["version"] == "1.0.0"


def test_a_repository_with_addons_cannot_be_deleted_until_they_are_gone(cluster: Cluster, name: str) -> None:
    repositories, addons = cluster.user(REPOSITORY), cluster.user(ADDON)
    repositories.create(repository(name))
    indexed_chart(cluster, name, "podinfo")
    cluster.stack.wait_caught_up(ADDON.group_kind, addons.create(addon(name, name, "podinfo", "1.0.0")).object)

    refusal = refused(lambda: repositories.delete(name))

    message = MSG_REPOSITORY_IN_USE.format(count=1, plural="", names=name)
    rule = "charts.repository-in-use"
    assert refusal == Refusal(403, denied(VALIDATE, "HelmClusterAddonRepository", name, rule, message))
    assert "deletionTimestamp" not in repositories.get(name)["metadata"]

    addons.delete(name)
    cluster.stack.wait_uncached(ADDON.group_kind, name)
    repositories.delete(name)
    assert not repositories.exists(name)


def test_an_addon_may_return_to_the_version_it_runs_after_the_repository_dropped_it(
    cluster: Cluster, name: str
) -> None:
    cluster.user(REPOSITORY).create(REPOSITORY.manifest(name, spec={"url": "https://charts.example.com/stable"}))
    charts, addons = cluster.warden(CHART), cluster.user(ADDON)
    chart_name = charts.create(chart(name, "podinfo")).object["metadata"]["name"]
    current = {"version": "1.0.0", "digest": "sha256:" + "b" * 64}
    older = {"version": "0.9.0", "digest": "sha256:" + "c" * 64}
    dropped = {"version": "0.9.0", "unavailableReason": "RemovedFromRepository", "unavailableMessage": "not in index"}

    def index(*versions: dict[str, Any]) -> None:
        written = charts.patch_status(chart_name, {"status": {"versions": list(versions)}}).object
        cluster.stack.wait_caught_up(CHART.group_kind, written)

    index(current, older)
    addons.create(addon(name, name, "podinfo", "0.9.0"))
    index(current, dropped)
    addons.patch(name, {"spec": {"chart": {"version": "1.0.0"}}})
    back = {"spec": {"chart": {"version": "0.9.0"}}}

    # not running 0.9.0: choosing it again is refused, with the chart's reason
    detail = "RemovedFromRepository: not in index"
    message = MSG_VERSION_UNUSABLE.format(chart=chart_name, version="0.9.0", detail=detail, repository=name)
    rule = "charts.addon-deployable-version"
    assert refused(lambda: addons.patch(name, back)) == Refusal(
        403, denied(VALIDATE, "HelmClusterAddon", name, rule, message)
    )

    # running 0.9.0 (the module's status says so): returning to it is allowed
    applied = {"helmClusterAddonRepository": name, "helmClusterAddonChart": "podinfo", "version": "0.9.0"}
    # (read from the stored object the apiserver sends as oldObject, so no cache wait is needed)
    cluster.as_user(KUBE_SYSTEM_SA, ADDON).patch_status(name, {"status": {"lastAppliedChart": applied}})
    returned = addons.patch(name, back)

    assert (returned.object["spec"]["chart"]["version"], returned.warnings) == ("0.9.0", [])


def test_upgrade_window_a_pre_upgrade_chart_under_an_older_name_is_read_by_its_labels(
    cluster: Cluster, name: str
) -> None:
    """Seed 004: a chart object as operator-helm @7c1f84f left it (older name, {version, digest, pulled})
    is found by its labels; its OCI entries have no verdict yet, so a version is refused with the way
    out until the index records a media type, then allowed."""
    cluster.user(REPOSITORY).create(repository(name))
    module = cluster.as_user(KUBE_SYSTEM_SA, CHART)
    old_name = f"{name}-podinfo"
    created = module.create(CHART.manifest(old_name, metadata={"labels": {"repository": name, "chart": "podinfo"}}))
    pre_upgrade = [{"version": "1.0.0", "digest": "sha256:" + "d" * 64, "pulled": True}]
    written = module.patch_status(created.object["metadata"]["name"], {"status": {"versions": pre_upgrade}}).object
    cluster.stack.wait_caught_up(CHART.group_kind, written)
    addons = cluster.user(ADDON)

    refusal = refused(lambda: addons.create(addon(name, name, "podinfo", "1.0.0")))

    message = MSG_VERSION_UNRESOLVED.format(chart=old_name, version="1.0.0", repository=name)
    rule = "charts.addon-deployable-version"
    assert refusal == Refusal(403, denied(VALIDATE, "HelmClusterAddon", name, rule, message))

    examined = [{"version": "1.0.0", "digest": "sha256:" + "d" * 64, "mediaType": HELM_LAYER}]
    written = module.patch_status(old_name, {"status": {"versions": examined}}).object
    cluster.stack.wait_caught_up(CHART.group_kind, written)
    assert addons.create(addon(name, name, "podinfo", "1.0.0")).warnings == []


def test_an_http_index_pointing_at_an_invalid_oci_reference_is_refused_with_its_reason(
    cluster: Cluster, name: str
) -> None:
    cluster.user(REPOSITORY).create(REPOSITORY.manifest(name, spec={"url": "https://charts.example.com/stable"}))
    charts = cluster.warden(CHART)
    chart_name = charts.create(chart(name, "podinfo")).object["metadata"]["name"]
    bad = 'oci reference "oci://ghcr.io/acme/podinfo@sha256:0f" addresses a digest'
    versions = [
        {"version": "2.0.0", "ociRef": "oci://ghcr.io/acme/podinfo:2.0.0"},
        {"version": "1.0.0", "unavailableReason": "InvalidChartReference", "unavailableMessage": bad},
    ]
    cluster.stack.wait_caught_up(
        CHART.group_kind, charts.patch_status(chart_name, {"status": {"versions": versions}}).object
    )
    addons = cluster.user(ADDON)

    refusal = refused(lambda: addons.create(addon(name, name, "podinfo", "1.0.0")))

    detail = f"InvalidChartReference: {bad}"
    message = MSG_INVALID_REFERENCE.format(chart=chart_name, version="1.0.0", detail=detail, repository=name)
    rule = "charts.addon-deployable-version"
    assert refusal == Refusal(403, denied(VALIDATE, "HelmClusterAddon", name, rule, message))
    assert addons.create(addon(name, name, "podinfo", "2.0.0")).warnings == []
