"""The control plane starts and does what the later end-to-end tests lean on.

kube-apiserver accepts the CRDs in ``manifests/crds`` as shipped (structural schemas, CEL rules,
selectableFields, conversion strategy) and marks each Established; the controller manager's
namespace controller and garbage collector run, so a deleted namespace goes away and a dependent
follows its owner. Where kubectl or the control plane build is missing, every test fails with one
line naming ``tests/support/install.sh``.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.controlplane import ControlPlane, control_plane
from tests.support.controlplane.cluster import missing_prerequisite
from tests.support.controlplane.launcher import log_tail

REPO = Path(__file__).resolve().parents[2]
FAMILIES = sorted(path.parent for path in (REPO / "manifests" / "crds").glob("*/kustomization.yaml"))
KUBECTL = "/usr/bin/kubectl"
WAIT = 60.0
KUBE_SYSTEM_SA = "/api/v1/namespaces/kube-system/serviceaccounts"
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    missing = missing_prerequisite()
    if missing:
        pytest.fail(missing, pytrace=False)  # never a skip: CI must not pass without the control plane
    with control_plane() as started:
        yield started


@pytest.fixture
def api(plane: ControlPlane) -> Iterator[httpx.Client]:
    with plane.client() as client:
        yield client


def kubectl(plane: ControlPlane, *args: str) -> str:
    done = subprocess.run(
        [KUBECTL, f"--kubeconfig={plane.kubeconfig}", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def wait_for(plane: ControlPlane, condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` with a deadline; on timeout show the controller manager's last log lines."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            log = plane.workdir / "logs" / "kube-controller-manager.log"
            raise AssertionError(f"timed out after {WAIT}s waiting for {what}; {log}:\n{log_tail(log)}")
        time.sleep(0.1)


def established(api: httpx.Client, name: str) -> bool:
    response = api.get(f"{CRD_API}/{name}")
    response.raise_for_status()
    conditions = (response.json().get("status") or {}).get("conditions") or []  # null until first set
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def gone(api: httpx.Client, path: str) -> bool:
    status = api.get(path).status_code
    assert status in (200, 404), f"GET {path}: HTTP {status}"
    return status == 404


def test_the_shipped_crds_are_accepted_and_established(plane: ControlPlane, api: httpx.Client) -> None:
    shipped: set[str] = set()
    for family in FAMILIES:
        shipped |= {doc["metadata"]["name"] for doc in yaml.safe_load_all(kubectl(plane, "kustomize", str(family)))}
    assert len(FAMILIES) == 3 and len(shipped) >= 10, shipped

    for family in FAMILIES:
        kubectl(plane, "apply", "--server-side", "-k", str(family))

    for name in sorted(shipped):
        wait_for(plane, lambda name=name: established(api, name), f"CRD {name} to be Established")
    served = {item["metadata"]["name"] for item in api.get(CRD_API).json()["items"]}
    assert served == shipped


def test_a_deleted_namespace_goes_away(plane: ControlPlane, api: httpx.Client) -> None:
    namespace = f"smoke-{uuid.uuid4().hex[:8]}"
    api.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}).raise_for_status()
    api.post(
        f"/api/v1/namespaces/{namespace}/configmaps", json={"metadata": {"name": "content"}, "data": {"a": "b"}}
    ).raise_for_status()

    api.delete(f"/api/v1/namespaces/{namespace}").raise_for_status()

    # Without a namespace controller it stays Terminating, held by the "kubernetes" finalizer.
    wait_for(plane, lambda: gone(api, f"/api/v1/namespaces/{namespace}"), f"namespace {namespace} to be deleted")
    # --use-service-account-credentials: the controller acts as its own service account.
    assert api.get(f"{KUBE_SYSTEM_SA}/namespace-controller").status_code == 200


def test_the_garbage_collector_removes_a_dependent(plane: ControlPlane, api: httpx.Client) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    owner = api.post(base, json={"metadata": {"name": f"owner-{uuid.uuid4().hex[:8]}"}})
    owner.raise_for_status()
    meta = owner.json()["metadata"]
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "uid": meta["uid"]}
    dependent = f"dependent-{uuid.uuid4().hex[:8]}"
    api.post(base, json={"metadata": {"name": dependent, "ownerReferences": [reference]}}).raise_for_status()

    api.delete(f"{base}/{meta['name']}").raise_for_status()

    wait_for(plane, lambda: gone(api, f"{base}/{dependent}"), f"configmap {dependent} to be garbage collected")
    assert api.get(f"{KUBE_SYSTEM_SA}/generic-garbage-collector").status_code == 200
