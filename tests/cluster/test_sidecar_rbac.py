"""The sidecar's loops with the shipped RBAC through the real apiserver, and one verb taken away.

With ``manifests/deploy/rbac.yaml`` as shipped, a sidecar (its ServiceAccount's token) takes the
Lease and its availability pass writes a ComponentVersion's status. Without ``patch`` on
componentversions in its ClusterRole, the same pass fails that write with the apiserver's 403:
counted in ``catalog_warden_availability_status_writes_total{result="error"}`` and logged with the
apiserver's message, the status left as it was.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.controlplane.cluster import NAMESPACE, SIDECAR_ACCOUNT, Cluster, SidecarProcess, find, wait_for
from webhook.kube.client import Kube
from webhook.sidecar.runner import LEASE_NAME

SIDECAR_USER = f"system:serviceaccount:{NAMESPACE}:{SIDECAR_ACCOUNT}"
CLUSTER_ROLE = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{SIDECAR_ACCOUNT}"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE_NAME}"
VERSIONS = "/apis/solar.opendefense.cloud/v1alpha1/namespaces/{ns}/componentversions"


def version(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "solar.opendefense.cloud/v1alpha1",
        "kind": "ComponentVersion",
        "metadata": {"name": "demo-1-0-0", "namespace": ns},
        "spec": {"componentRef": {"name": "demo"}, "tag": "1.0.0"},
    }


def status_writes(process: SidecarProcess, result: str) -> float:
    text = httpx.get(f"{process.probe_url}/metrics", timeout=5.0).text
    found = re.search(rf'^catalog_warden_availability_status_writes_total\{{result="{result}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def may_patch(kube: Kube, ns: str) -> bool:
    attributes = {"group": "solar.opendefense.cloud", "resource": "componentversions", "verb": "patch", "namespace": ns}
    body = {"spec": {"resourceAttributes": attributes}}
    review = kube.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body)
    return bool(review["status"]["allowed"])


def test_with_the_shipped_rbac_the_sidecar_leads_and_writes_availability(
    admin: Kube, sidecar: Callable[..., SidecarProcess], ns: str
) -> None:
    admin.request("POST", VERSIONS.format(ns=ns), body=version(ns))
    process = sidecar("sidecar-shipped-rbac").start()

    wait_for(lambda: status_writes(process, "written") >= 1, "the availability pass to write a status")
    assert status_writes(process, "error") == 0
    assert admin.request("GET", LEASE)["spec"]["holderIdentity"] == process.name
    condition = admin.request("GET", f"{VERSIONS.format(ns=ns)}/demo-1-0-0")["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Available", "Unknown", "CheckFailed")


def test_without_patch_on_componentversions_the_availability_write_fails_with_the_403(
    cluster: Cluster, admin: Kube, warden_kube: Kube, sidecar: Callable[..., SidecarProcess], ns: str
) -> None:
    admin.request("POST", VERSIONS.format(ns=ns), body=version(ns))
    shipped = find(cluster.applied, "ClusterRole", SIDECAR_ACCOUNT)
    narrowed = copy.deepcopy(admin.request("GET", CLUSTER_ROLE))
    rule = next(r for r in narrowed["rules"] if r["resources"] == ["componentversions"])
    assert rule == {"apiGroups": ["solar.opendefense.cloud"], "resources": ["componentversions"], "verbs": ["patch"]}
    narrowed["rules"].remove(rule)
    admin.request("PUT", CLUSTER_ROLE, body=narrowed)
    try:
        wait_for(lambda: not may_patch(warden_kube, ns), "RBAC to drop the patch")
        process = sidecar("sidecar-without-patch").start()
        wait_for(lambda: status_writes(process, "error") >= 1, "the availability pass to fail its write")
    finally:
        cluster.apply([shipped])

    forbidden = (
        f'componentversions.solar.opendefense.cloud "demo-1-0-0" is forbidden: User "{SIDECAR_USER}" cannot patch '
        f'resource "componentversions" in API group "solar.opendefense.cloud" in the namespace "{ns}"'
    )
    lines = map(json.loads, process.logs().splitlines())
    failed = [line for line in lines if line["msg"] == "availability check failed"]
    assert [(f["entry"], f["error"]) for f in failed] == [(f"{ns}/demo-1-0-0", f"ApiError: 403 Forbidden: {forbidden}")]
    assert status_writes(process, "written") == 0
    assert "status" not in admin.request("GET", f"{VERSIONS.format(ns=ns)}/demo-1-0-0")
