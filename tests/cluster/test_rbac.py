"""The server and the sidecar run with the shipped RBAC of their own ServiceAccounts, and a missing
permission shows.

The session's server synced its cache as ``catalog-warden-server`` (the fixture waited for its
``/readyz``). Here: it is that identity and can write nothing, and a server whose ClusterRole
lacks ``list`` on one kind stays unready, its readiness naming the kind and the apiserver's 403,
until the permission is back. The sidecar syncs its cache and takes its Lease with its own token.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from tests.support.controlplane.cluster import (
    NAMESPACE,
    SERVER_ACCOUNT,
    Cluster,
    ServerProcess,
    SidecarProcess,
    find,
    wait_for,
)
from webhook.kube.client import ApiError, Kube
from webhook.sidecar.runner import LEASE_NAME

SERVER_USER = f"system:serviceaccount:{NAMESPACE}:{SERVER_ACCOUNT}"
CLUSTER_ROLE = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{SERVER_ACCOUNT}"


def test_the_server_acts_as_its_own_service_account_and_can_write_nothing(server_kube: Kube, ns: str) -> None:
    review = server_kube.request(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body={"apiVersion": "authentication.k8s.io/v1"}
    )
    assert review["status"]["userInfo"]["username"] == SERVER_USER

    release = {"metadata": {"name": "web"}, "spec": {"componentVersionRef": {"name": "demo"}}}
    with pytest.raises(ApiError) as refused:
        server_kube.request("POST", f"/apis/solar.opendefense.cloud/v1alpha1/namespaces/{ns}/releases", body=release)

    assert (refused.value.status, refused.value.message) == (
        403,
        f'releases.solar.opendefense.cloud is forbidden: User "{SERVER_USER}" cannot create resource "releases" '
        f'in API group "solar.opendefense.cloud" in the namespace "{ns}"',
    )


def may_list(server_kube: Kube, group: str, resource: str) -> bool:
    review = server_kube.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={"spec": {"resourceAttributes": {"group": group, "resource": resource, "verb": "list"}}},
    )
    return bool(review["status"]["allowed"])


def test_a_server_without_list_on_one_kind_is_unready_naming_it_until_the_permission_returns(
    cluster: Cluster, admin: Kube, server_kube: Kube, new_server: Callable[..., ServerProcess]
) -> None:
    shipped = find(cluster.applied, "ClusterRole", SERVER_ACCOUNT)
    narrowed = copy.deepcopy(admin.request("GET", CLUSTER_ROLE))
    rule = next(r for r in narrowed["rules"] if r["apiGroups"] == ["porch.kpt.dev"])
    assert rule == {"apiGroups": ["porch.kpt.dev"], "resources": ["packagerevisions"], "verbs": ["list", "watch"]}
    rule["verbs"] = ["watch"]
    admin.request("PUT", CLUSTER_ROLE, body=narrowed)
    try:
        wait_for(lambda: not may_list(server_kube, "porch.kpt.dev", "packagerevisions"), "RBAC to drop the list")
        unready = new_server("server-without-list").start(wait_ready=False)
        forbidden = (
            f'packagerevisions.porch.kpt.dev is forbidden: User "{SERVER_USER}" cannot list resource '
            '"packagerevisions" in API group "porch.kpt.dev" at the cluster scope'
        )
        expected = (
            503,
            f"cluster state not synced: PackageRevision.porch.kpt.dev not listed yet (403 Forbidden: {forbidden})",
        )
        seen = [unready.readiness()]

        def answers_expected() -> bool:
            seen[0] = unready.readiness()
            return seen[0] == expected

        try:
            wait_for(answers_expected, f"/readyz to answer {expected}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last answer: {seen[0]}") from None
    finally:
        cluster.apply([shipped])

    unready.wait_ready()  # the reflector retries with backoff (at most 10 s) and lists
    assert unready.readiness() == (200, "ok")


def test_the_sidecar_syncs_and_takes_the_lease_as_its_own_service_account(
    admin: Kube, sidecar: Callable[..., SidecarProcess]
) -> None:
    process = sidecar("sidecar-rbac").start()  # ready: its cache listed every kind with the shipped RBAC

    lease = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE_NAME}"
    wait_for(
        lambda: admin.request("GET", lease).get("spec", {}).get("holderIdentity") == process.name,
        f"{process.name} to hold the Lease",
    )
    assert process.readiness() == (200, "ok")
